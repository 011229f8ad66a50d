package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/lease"
	"github.com/faucetgo/faucet/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkLeasedPostgres is BenchmarkLeased on PostgreSQL: a limit shared
// through one local PostgreSQL on few keys, one global limit (keys=1) and a
// hundred tenants (keys=100), from 1, 16 and 64 callers, at leasedLimit,
// which never binds. faucet_leased is pgstore's leased limiter (checks
// decided in memory from leases of the shared buckets), faucet pgstore per
// check, and engine the in-memory engine with no database: the floor.
// stmts/op is what reached the database per check; 1 - stmts/op is the
// share decided locally.
func BenchmarkLeasedPostgres(b *testing.B) {
	for _, nkeys := range []int{1, 100} {
		keys := keys13(nkeys)
		seq := uniformSeq(nkeys)
		for _, im := range []pgImpl{faucetPgLeasedImpl, faucetPgImpl, pgEngineImpl} {
			for _, callers := range redisCallers {
				b.Run(fmt.Sprintf("keys=%d/impl=%s/callers=%d", nkeys, im.name, callers), func(b *testing.B) {
					benchPgImpl(b, im, leasedLimit, callers, keys, seq)
				})
			}
		}
	}
}

// faucetPgLeasedImpl is pgstore's leased limiter with the default lease
// options, on the lease tables emptied first.
var faucetPgLeasedImpl = pgImpl{
	name: "faucet_leased",
	new: func(b *testing.B, pool *pgxpool.Pool, lim limit) (*pgCheck, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		t := pgstore.DefaultTable
		if _, err := pool.Exec(ctx, "TRUNCATE "+t+"_lease_buckets, "+t+"_leases"); err != nil {
			return nil, err
		}
		l, err := pgstore.New(pool, pgstore.Config{Limit: engine.Limit(lim.rate), Burst: float64(lim.burst), Prefix: "bench:", Timeout: pgTimeout})
		if err != nil {
			return nil, err
		}
		s, err := pgstore.NewLeased(l, lease.Options{})
		if err != nil {
			l.Close()
			return nil, err
		}
		return &pgCheck{
			check: func(ctx context.Context, key string) (bool, error) {
				d, err := s.Take(ctx, key, 1)
				return d.Allowed, err
			},
			stmts:     func() (int64, error) { return int64(l.Stats().Calls), nil },
			serverCPU: pgServerCPU(b, pool),
			close:     func() { s.Close(); l.Close() },
		}, nil
	},
}

// pgEngineImpl is the engine alone (engineImpl) in BenchmarkLeasedPostgres.
var pgEngineImpl = pgImpl{
	name: "engine",
	new: func(b *testing.B, pool *pgxpool.Pool, lim limit) (*pgCheck, error) {
		check, closeFn, err := engineImpl.new("", lim, 0)
		if err != nil {
			return nil, err
		}
		return &pgCheck{
			check:     check,
			stmts:     func() (int64, error) { return 0, nil },
			serverCPU: pgServerCPU(b, pool),
			close:     closeFn,
		}, nil
	},
}
