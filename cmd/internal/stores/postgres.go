package stores

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/pgdsn"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// postgresConnectTimeout bounds connecting and installing at start.
	postgresConnectTimeout = 10 * time.Second
	// defaultPostgresConns is the pool's size unless the DSN sets
	// pool_max_conns: each check holds a connection for one round trip,
	// and pgx's default (4 on a small machine) would queue a busy
	// server's checks behind each other.
	defaultPostgresConns = 32
	// defaultPostgresIdleConns is the connections kept open and ready
	// unless the DSN sets pool_min_conns: a burst of new keys then finds
	// them rather than waits for new ones to connect.
	defaultPostgresIdleConns = 8
)

// openPostgres connects to --postgres, installs or checks the schema,
// and returns the store and the function that closes it and the pool.
func openPostgres(s *settings.Serve, logger *slog.Logger) (engine.Store, func() error, error) {
	f := &s.Postgres
	pcfg, err := pgdsn.Config("postgres", f.DSN)
	if err != nil {
		return nil, nil, err
	}
	if !strings.Contains(f.DSN, "pool_max_conns") {
		pcfg.MaxConns = defaultPostgresConns
	}
	if !strings.Contains(f.DSN, "pool_min_conns") {
		pcfg.MinConns = min(pcfg.MaxConns, defaultPostgresIdleConns)
	}
	// A new connection is readied before a check gets it; before Install
	// the functions may not exist, and the connection is fine all the same.
	pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		pgstore.WarmConn(ctx, c, f.Table)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), postgresConnectTimeout)
	defer cancel()
	pool, err := pgdsn.OpenConfig(ctx, "postgres", pcfg, postgresConnectTimeout)
	if err != nil {
		return nil, nil, err
	}
	if f.Install {
		err = pgstore.Install(ctx, pool, pgstore.Schema{Table: f.Table, Logged: f.Logged})
	} else if s.Redis.Lease {
		err = pgstore.CheckLeases(ctx, pool, f.Table)
	} else {
		err = pgstore.Check(ctx, pool, f.Table)
	}
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("--postgres: %w", err)
	}
	warmPool(ctx, pool, f.Table, int(pcfg.MinConns))
	sweep := f.Sweep
	if sweep == 0 {
		sweep = -1
	}
	st, err := pgstore.NewStore(pool, pgstore.StoreOptions{
		Table:         f.Table,
		Prefix:        f.Prefix,
		Timeout:       f.Timeout,
		FallbackShare: f.Share,
		// --max-keys bounds every in-memory bucket table, the fallback's too.
		FallbackMaxKeys: cmp.Or(s.MaxKeys, -1),
		SweepEvery:      sweep,
		Logger:          logger,
		// --lease and --lease-lifetime are the Redis store's too.
		Lease: leaseOptions(s),
	})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	logger.Info("buckets in PostgreSQL", "host", pcfg.ConnConfig.Host, "database", pcfg.ConnConfig.Database, "table", f.Table, "prefix", f.Prefix, "lease", s.Redis.Lease)
	return st, func() error { err := st.Close(); pool.Close(); return err }, nil
}

// warmPool opens n connections at once and readies each (pgstore.WarmConn),
// those open already included, so that the first checks find them ready.
// A connection that fails is left to the pool to open again later.
func warmPool(ctx context.Context, pool *pgxpool.Pool, table string, n int) {
	conns := make([]*pgxpool.Conn, n)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			if c, err := pool.Acquire(ctx); err == nil {
				pgstore.WarmConn(ctx, c, table)
				conns[i] = c
			}
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
}
