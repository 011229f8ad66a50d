package stores

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/redisstore"
	"github.com/redis/rueidis"
)

// Open builds the bucket store the settings name, and the function that
// closes it, and the pool or client under it, on shutdown.
func Open(s *settings.Serve, logger *slog.Logger) (engine.Store, func() error, error) {
	if s.Postgres.DSN != "" {
		return openPostgres(s, logger)
	}
	if s.Redis.Addrs == "" {
		m := httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxKeys: s.MaxKeys, OnFull: s.FullPolicy(),
			MaxBytesPerLimit: int64(s.MaxLimitMiB) << 20})
		return m, m.Close, nil
	}
	return openRedis(s, logger)
}

// openRedis connects to --redis.
func openRedis(s *settings.Serve, logger *slog.Logger) (engine.Store, func() error, error) {
	f := &s.Redis
	opt := rueidis.ClientOption{
		InitAddress: f.List(),
		// The password stays out of argv, where any local user could read
		// it in the process list.
		Username: os.Getenv("FAUCET_REDIS_USERNAME"),
		Password: os.Getenv("FAUCET_REDIS_PASSWORD"),
		// A server that does not answer at all is found out by the
		// per-request deadline; this bounds connecting.
		Dialer:           net.Dialer{Timeout: 5 * time.Second},
		ConnWriteTimeout: 5 * time.Second,
	}
	if f.TLS {
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, nil, fmt.Errorf("--redis %s: %w", f.Addrs, err)
	}
	st, err := redisstore.NewStore(client, redisstore.StoreOptions{
		Prefix:        f.Prefix,
		Timeout:       f.Timeout,
		FallbackShare: f.Share,
		// --max-keys bounds every in-memory bucket table, the fallback's too.
		FallbackMaxKeys: cmp.Or(s.MaxKeys, -1),
		Lease:           leaseOptions(s),
	})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	logger.Info("buckets in Redis", "redis", f.Addrs, "prefix", f.Prefix, "lease", f.Lease)
	return st, func() error { client.Close(); return nil }, nil
}

// leaseOptions are the store's lease options: nil without --lease. A
// lease's keys are bounded by --max-keys, as every in-memory table is.
func leaseOptions(s *settings.Serve) *redisstore.LeaseOptions {
	if !s.Redis.Lease {
		return nil
	}
	return &redisstore.LeaseOptions{Lifetime: s.Redis.LeaseLife, MaxKeys: s.MaxKeys}
}
