package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/faucetgo/faucet/pgstore"
	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// sharedStore is the store of a shared-load run: the flags that put serve
// on it, and the faults it can be put through while the load goes on.
type sharedStore struct {
	name string   // "postgres" or "redis"
	args []string // serve's flags for it
	// slow keeps the store from answering the hot key for d, its callers
	// waiting, and returns when it answers again.
	slow func(d time.Duration)
	// restart stops the store, leaves it down for down, starts it again
	// on the same address and returns when it accepts connections.
	restart func(down time.Duration)
	// restartLoses reports whether a restart empties the buckets: each
	// is full again after it, one more burst.
	restartLoses bool
}

// newSharedStore starts store ("postgres" or "redis") for the test, or
// skips (fails, under FAUCET_REQUIRE_POSTGRES=1 or FAUCET_REQUIRE_REDIS=1)
// without its binaries. Faults report their own failures with tb.Errorf:
// they run beside the load, not on the test's goroutine.
func newSharedStore(tb testing.TB, store string) *sharedStore {
	tb.Helper()
	switch store {
	case "postgres":
		return postgresShared(tb)
	case "redis":
		return redisShared(tb)
	}
	tb.Fatalf("no store %q", store)
	return nil
}

func postgresShared(tb testing.TB) *sharedStore {
	srv := pgtest.Start(tb)
	dsn := srv.DSN()
	return &sharedStore{
		name: "postgres",
		// Every instance may install: the schema's statements take a
		// lock, and serve starts the instances one after another.
		args: []string{"--postgres", dsn, "--postgres-install"},
		// Another transaction holds the rows locked, the hot key's among
		// them: every write of it waits, as behind a slow writer.
		slow: func(d time.Duration) {
			sql := fmt.Sprintf("BEGIN; SELECT 1 FROM %s FOR UPDATE; SELECT pg_sleep(%g); COMMIT", pgstore.DefaultTable, d.Seconds())
			if err := srv.ExecDSN(dsn, sql); err != nil {
				tb.Errorf("holding the hot row locked: %v", err)
			}
		},
		// A clean stop (as an administrator's restart) keeps the
		// UNLOGGED bucket table; a crash would empty it.
		restart: func(down time.Duration) {
			srv.StopClean()
			time.Sleep(down)
			if err := srv.Restart(); err != nil {
				tb.Errorf("restarting PostgreSQL: %v", err)
			}
		},
	}
}

func redisShared(tb testing.TB) *sharedStore {
	r := redistest.Start(tb)
	return &sharedStore{
		name: "redis",
		args: []string{"--redis", r.Addr()},
		// CLIENT PAUSE holds every client's commands, scripts included,
		// until it ends.
		slow: func(d time.Duration) {
			if _, err := r.Do("CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "ALL"); err != nil {
				tb.Errorf("CLIENT PAUSE: %v", err)
				return
			}
			time.Sleep(d)
		},
		// The server runs without persistence: a restart empties it.
		restart: func(down time.Duration) {
			r.Kill()
			time.Sleep(down)
			if err := r.Restart(); err != nil {
				tb.Errorf("restarting redis-server: %v", err)
			}
		},
		restartLoses: true,
	}
}
