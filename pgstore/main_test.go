package pgstore

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests share one PostgreSQL server per test binary (pgtest.Shared), each
// in a database of its own; the fault tests start servers of their own.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

// testTimeout bounds each statement in tests that are not about timing:
// DefaultTimeout (100 ms) is a production round trip's bound, which a
// PostgreSQL on a machine busy with the whole test suite under -race can
// exceed.
const testTimeout = 10 * time.Second

// newDB returns a pool on a fresh database with the schema installed.
func newDB(t testing.TB, schema Schema) *pgxpool.Pool {
	t.Helper()
	return poolOn(t, pgtest.Shared(t).NewDatabase(t), schema)
}

// poolOn connects a pool to dsn and installs schema there.
func poolOn(t testing.TB, dsn string, schema Schema) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Install(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	return pool
}

var prefixes atomic.Int64

// uniquePrefix keeps the limiters of one database apart.
func uniquePrefix() string { return "t" + strconv.FormatInt(prefixes.Add(1), 10) + ":" }

// nopDB is a DB that is never called: for configuration tests.
type nopDB struct{ DB }
