package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// postgresFlags are serve's flags for a bucket store in PostgreSQL.
type postgresFlags struct {
	dsn     string
	table   string
	prefix  string
	timeout time.Duration
	share   float64
	install bool
	logged  bool
	sweep   time.Duration
}

const (
	defaultPostgresPrefix = "http:"
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

func (f *postgresFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dsn, "postgres", "", "keep buckets in PostgreSQL at `DSN` (URL or key=value; no password: PGPASSWORD), shared by every instance")
	fs.StringVar(&f.table, "postgres-table", pgstore.DefaultTable, "bucket table; its functions are named after it")
	fs.StringVar(&f.prefix, "postgres-prefix", defaultPostgresPrefix, "prefix of every bucket's key; instances share buckets only with the same prefix")
	fs.DurationVar(&f.timeout, "postgres-timeout", pgstore.DefaultTimeout, "longest wait for PostgreSQL per request before the in-memory fallback (or the rule's fail_mode) decides")
	fs.Float64Var(&f.share, "postgres-fallback-share", 0, "while PostgreSQL fails, decide in memory at this `SHARE` of each rule's rate and burst, in (0, 1] (0: 1/N, N the instances sharing the table, counted by their heartbeats)")
	fs.BoolVar(&f.install, "postgres-install", false, "create the bucket table and its functions if missing (and replace the functions) at start")
	fs.BoolVar(&f.logged, "postgres-logged", false, "with --postgres-install, create a logged table (kept across a crash, replicated) instead of an UNLOGGED one")
	fs.DurationVar(&f.sweep, "postgres-sweep", 30*time.Second, "how often to remove the rows of buckets that are full again (0: never; another instance or a job sweeps)")
}

// problems lists what is wrong with the PostgreSQL flags.
func (f *postgresFlags) problems(redis string) []string {
	var problems []string
	if f.dsn == "" {
		if f.table != pgstore.DefaultTable || f.prefix != defaultPostgresPrefix || f.timeout != pgstore.DefaultTimeout ||
			f.share != 0 || f.install || f.logged || f.sweep != 30*time.Second {
			problems = append(problems, "--postgres-table, --postgres-prefix, --postgres-timeout, --postgres-fallback-share, --postgres-install, --postgres-logged, --postgres-sweep: only mean something with --postgres")
		}
		return problems
	}
	if redis != "" {
		problems = append(problems, "--postgres: one bucket store at a time, not with --redis")
	}
	if _, err := pgConfig("postgres", f.dsn); err != nil {
		problems = append(problems, err.Error())
	}
	if err := (pgstore.StoreOptions{Table: f.table, Prefix: f.prefix, Timeout: f.timeout}).Check(); err != nil {
		problems = append(problems, "--postgres-table, --postgres-prefix, --postgres-timeout: "+strings.TrimPrefix(err.Error(), pgstore.ErrInvalidConfig.Error()+": "))
	}
	if f.timeout <= 0 {
		problems = append(problems, fmt.Sprintf("--postgres-timeout: must be positive, got %v", f.timeout))
	}
	if !(f.share >= 0 && f.share <= 1) {
		problems = append(problems, fmt.Sprintf("--postgres-fallback-share: must be in (0, 1], or 0 for 1/instances, got %v", f.share))
	}
	if f.logged && !f.install {
		problems = append(problems, "--postgres-logged: only means something with --postgres-install")
	}
	if f.sweep < 0 {
		problems = append(problems, fmt.Sprintf("--postgres-sweep: must be 0 (never) or positive, got %v", f.sweep))
	}
	return problems
}

// newPostgresStore connects to --postgres, installs or checks the schema,
// and returns the store and the function that closes it and the pool.
func newPostgresStore(cfg *serveConfig, logger *slog.Logger) (engine.Store, func() error, error) {
	f := &cfg.postgres
	pcfg, err := pgConfig("postgres", f.dsn)
	if err != nil {
		return nil, nil, err
	}
	if !strings.Contains(f.dsn, "pool_max_conns") {
		pcfg.MaxConns = defaultPostgresConns
	}
	if !strings.Contains(f.dsn, "pool_min_conns") {
		pcfg.MinConns = min(pcfg.MaxConns, defaultPostgresIdleConns)
	}
	// A new connection is readied before a check gets it; before Install
	// the functions may not exist, and the connection is fine all the same.
	pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		pgstore.WarmConn(ctx, c, f.table)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), postgresConnectTimeout)
	defer cancel()
	pool, err := openPGConfig(ctx, "postgres", pcfg, postgresConnectTimeout)
	if err != nil {
		return nil, nil, err
	}
	if f.install {
		err = pgstore.Install(ctx, pool, pgstore.Schema{Table: f.table, Logged: f.logged})
	} else if cfg.redis.lease {
		err = pgstore.CheckLeases(ctx, pool, f.table)
	} else {
		err = pgstore.Check(ctx, pool, f.table)
	}
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("--postgres: %w", err)
	}
	warmPool(ctx, pool, f.table, int(pcfg.MinConns))
	sweep := f.sweep
	if sweep == 0 {
		sweep = -1
	}
	s, err := pgstore.NewStore(pool, pgstore.StoreOptions{
		Table:         f.table,
		Prefix:        f.prefix,
		Timeout:       f.timeout,
		FallbackShare: f.share,
		// --max-keys bounds every in-memory bucket table, the fallback's too.
		FallbackMaxKeys: cmp.Or(cfg.maxKeys, -1),
		SweepEvery:      sweep,
		Logger:          logger,
		// --lease and --lease-lifetime are the Redis store's too.
		Lease: cfg.redis.leaseOptions(cfg.maxKeys),
	})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	logger.Info("buckets in PostgreSQL", "host", pcfg.ConnConfig.Host, "database", pcfg.ConnConfig.Database, "table", f.table, "prefix", f.prefix, "lease", cfg.redis.lease)
	return s, func() error { err := s.Close(); pool.Close(); return err }, nil
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
