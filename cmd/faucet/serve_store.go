package main

import (
	"cmp"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/redisstore"
	"github.com/redis/rueidis"
)

// redisFlags are serve's flags for a shared Redis store.
type redisFlags struct {
	addrs   string
	timeout time.Duration
	prefix  string
	tls     bool
	share   float64
	// lease, with leaseLife, makes every rule's limiter a leased one.
	lease     bool
	leaseLife time.Duration
}

// serve's Redis flags default to the store's own defaults.
const (
	defaultRedisTimeout = redisstore.DefaultTimeout
	defaultRedisPrefix  = redisstore.DefaultStorePrefix
)

func (f *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addrs, "redis", "", "keep buckets in Redis at host:port `ADDR` (a comma list: seeds of a Redis Cluster), shared by every instance")
	fs.DurationVar(&f.timeout, "redis-timeout", defaultRedisTimeout, "longest wait for Redis per request before the in-memory fallback (or the rule's fail_mode) decides")
	fs.StringVar(&f.prefix, "redis-prefix", defaultRedisPrefix, "prefix of every Redis key; instances share buckets only with the same prefix")
	fs.BoolVar(&f.tls, "redis-tls", false, "connect to Redis over TLS")
	fs.Float64Var(&f.share, "redis-fallback-share", 0, "while Redis fails, decide in memory at this `SHARE` of each rule's rate and burst, in (0, 1] (0: 1/N, N the instances sharing Redis, counted by their heartbeats)")
	fs.BoolVar(&f.lease, "lease", false, "decide most checks in memory from leases of the shared buckets in Redis or PostgreSQL (every instance must lease, or none: leased buckets are apart from per-check ones)")
	fs.DurationVar(&f.leaseLife, "lease-lifetime", time.Second, "how long a lease lasts; tokens left in a lease whose instance dies are lost for this long at most")
}

// problems lists what is wrong with the Redis flags, and the lease flags,
// which --postgres (its DSN) shares.
func (f *redisFlags) problems(postgres string) []string {
	var problems []string
	if f.addrs == "" {
		if f.timeout != defaultRedisTimeout || f.prefix != defaultRedisPrefix || f.tls || f.share != 0 {
			problems = append(problems, "--redis-timeout, --redis-prefix, --redis-tls, --redis-fallback-share: only mean something with --redis")
		}
		if postgres == "" {
			if f.lease || f.leaseLife != time.Second {
				problems = append(problems, "--lease, --lease-lifetime: only mean something with --redis or --postgres")
			}
			return problems
		}
		return append(problems, f.leaseProblems()...)
	}
	for _, a := range f.list() {
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			problems = append(problems, fmt.Sprintf("--redis: %q is not host:port with a port from 1 to 65535", a))
		}
	}
	if f.timeout <= 0 {
		problems = append(problems, fmt.Sprintf("--redis-timeout: must be positive, got %v", f.timeout))
	}
	if f.prefix == "" || strings.ContainsAny(f.prefix, "{}") {
		problems = append(problems, fmt.Sprintf("--redis-prefix: must be non-empty, without '{' or '}', got %q", f.prefix))
	}
	if !(f.share >= 0 && f.share <= 1) {
		problems = append(problems, fmt.Sprintf("--redis-fallback-share: must be in (0, 1], or 0 for 1/instances, got %v", f.share))
	}
	return append(problems, f.leaseProblems()...)
}

// leaseProblems lists what is wrong with the lease flags, given a store.
func (f *redisFlags) leaseProblems() []string {
	var problems []string
	if f.leaseLife != time.Second && !f.lease {
		problems = append(problems, "--lease-lifetime: only means something with --lease")
	}
	if f.leaseLife < 10*time.Millisecond {
		problems = append(problems, fmt.Sprintf("--lease-lifetime: must be at least 10ms, got %v", f.leaseLife))
	}
	return problems
}

// leaseOptions are the store's lease options: nil without --lease. A
// lease's keys are bounded by --max-keys, as every in-memory table is.
func (f *redisFlags) leaseOptions(maxKeys int) *redisstore.LeaseOptions {
	if !f.lease {
		return nil
	}
	return &redisstore.LeaseOptions{Lifetime: f.leaseLife, MaxKeys: maxKeys}
}

// list splits --redis into its addresses.
func (f *redisFlags) list() []string {
	var out []string
	for a := range strings.SplitSeq(f.addrs, ",") {
		out = append(out, strings.TrimSpace(a))
	}
	return out
}

// fullPolicies are the values of --on-full.
var fullPolicies = map[string]engine.FullPolicy{"share": engine.FullShare, "deny": engine.FullDeny}

// newStore builds the bucket store serve runs on, and the function that
// closes it on shutdown. Every store option of serve is decided here.
func newStore(cfg *serveConfig, logger *slog.Logger) (engine.Store, func() error, error) {
	if cfg.postgres.dsn != "" {
		return newPostgresStore(cfg, logger)
	}
	if cfg.redis.addrs == "" {
		s := httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxKeys: cfg.maxKeys, OnFull: fullPolicies[cfg.onFull]})
		return s, s.Close, nil
	}
	f := &cfg.redis
	opt := rueidis.ClientOption{
		InitAddress: f.list(),
		// The password stays out of argv, where any local user could read
		// it in the process list.
		Username: os.Getenv("FAUCET_REDIS_USERNAME"),
		Password: os.Getenv("FAUCET_REDIS_PASSWORD"),
		// A server that does not answer at all is found out by the
		// per-request deadline; this bounds connecting.
		Dialer:           net.Dialer{Timeout: 5 * time.Second},
		ConnWriteTimeout: 5 * time.Second,
	}
	if f.tls {
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, nil, fmt.Errorf("--redis %s: %w", f.addrs, err)
	}
	s, err := redisstore.NewStore(client, redisstore.StoreOptions{
		Prefix:        f.prefix,
		Timeout:       f.timeout,
		FallbackShare: f.share,
		// --max-keys bounds every in-memory bucket table, the fallback's too.
		FallbackMaxKeys: cmp.Or(cfg.maxKeys, -1),
		Lease:           f.leaseOptions(cfg.maxKeys),
	})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	logger.Info("buckets in Redis", "redis", f.addrs, "prefix", f.prefix, "lease", f.lease)
	return s, func() error { client.Close(); return nil }, nil
}
