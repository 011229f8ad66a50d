package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The failure tests run servers of their own, which they stop, crash,
// restart, and whose backends they terminate.

// ownPool starts a server and returns it with a pool whose connections are
// named app (application_name), and the schema installed.
func ownPool(t *testing.T, app string, params map[string]string, schema Schema) (*pgtest.Server, *pgxpool.Pool) {
	t.Helper()
	srv := pgtest.Start(t)
	cfg, err := pgxpool.ParseConfig(srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := Install(context.Background(), pool, schema); err != nil {
		t.Fatal(err)
	}
	return srv, pool
}

func mustNew(t *testing.T, db DB, cfg Config) *Limiter {
	t.Helper()
	l, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// classified reports whether err says what happened to the tokens.
func classified(err error) bool {
	return errors.Is(err, engine.ErrUnavailable) != errors.Is(err, engine.ErrOutcomeUnknown)
}

// TestServerStoppedAndRestarted: while the server is down every call
// answers by its policy within its deadline with a classified error, the
// breaker opens after BreakAfter failures and answers without calling, and
// once the server is back calls succeed again.
func TestServerStoppedAndRestarted(t *testing.T) {
	srv, pool := ownPool(t, "pgstore-stop", nil, Schema{})
	base := Config{Limit: 1, Burst: 5, Timeout: 300 * time.Millisecond, BreakAfter: 3, BreakFor: 400 * time.Millisecond}
	open := base
	closed := base
	closed.OnFailure = FailClosed
	fb := base
	fb.OnFailure, fb.FallbackShare = Fallback, 0.5
	lo, lc, lf := mustNew(t, pool, open), mustNew(t, pool, closed), mustNew(t, pool, fb)
	ctx := context.Background()
	for _, l := range []*Limiter{lo, lc, lf} {
		if d, err := l.Take(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("%v before the stop: %+v %v", l.s.OnFailure, d, err)
		}
	}
	srv.Stop()
	sawUnavailable := false
	for i := range 6 {
		start := time.Now()
		d, err := lo.Take(ctx, "k", 1)
		if took := time.Since(start); took > base.Timeout+2*time.Second {
			t.Fatalf("call %d took %v with a deadline of %v", i, took, base.Timeout)
		}
		if err == nil || !classified(err) || !d.Allowed || d.Remaining != 5 {
			t.Fatalf("fail-open call %d: %+v %v", i, d, err)
		}
		sawUnavailable = sawUnavailable || errors.Is(err, engine.ErrUnavailable)
		if i >= 3 && !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("call %d after %d failures: %v, want the breaker's answer", i, base.BreakAfter, err)
		}
	}
	if !sawUnavailable {
		t.Error("no call against a stopped server said that nothing was taken (connection refused)")
	}
	if s := lo.Stats(); s.Skipped < 2 || s.FailedOpen != 6 || s.StoreErrors != 6 {
		t.Errorf("stats %+v: want 6 fail-open answers, at least 2 skipped by the breaker", s)
	}
	if d, err := lc.Take(ctx, "k", 1); err == nil || d.Allowed || d.RetryAfter != closed.Timeout {
		t.Errorf("fail-closed: %+v %v", d, err)
	}
	// The fallback engine holds half the burst: 2.5 tokens.
	var allowed int
	for range 4 {
		d, err := lf.Take(ctx, "k", 1)
		if !errors.Is(err, engine.ErrFallback) {
			t.Fatalf("fallback: %v", err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("fallback admitted %d of 4 takes, want 2 (half of a burst of 5)", allowed)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := lo.Take(ctx, "k2", 1)
		if err == nil {
			if !d.Allowed || d.Remaining != 4 {
				t.Fatalf("after the restart: %+v", d)
			}
			break
		}
		if !classified(err) {
			t.Fatalf("after the restart: unclassified %v", err)
		}
		if !errors.Is(err, ErrBreakerOpen) {
			t.Logf("after the restart: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no success within 20 s of the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCrashAndUnloggedTable pins down the documented trade-off: a crash
// (immediate shutdown) empties an UNLOGGED table, so its buckets come back
// full; a logged table keeps them; a clean restart keeps both.
func TestCrashAndUnloggedTable(t *testing.T) {
	srv, pool := ownPool(t, "pgstore-crash", nil, Schema{})
	if err := Install(context.Background(), pool, Schema{Table: "logged_buckets", Logged: true}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Limit: 0.001, Burst: 5, Timeout: 5 * time.Second}
	unlogged := mustNew(t, pool, cfg)
	cfg.Table = "logged_buckets"
	logged := mustNew(t, pool, cfg)
	ctx := context.Background()
	drain := func() {
		for _, l := range []*Limiter{unlogged, logged} {
			if d, err := l.Take(ctx, "k", 5); err != nil || !d.Allowed {
				t.Fatalf("%s: drain: %+v %v", l.s.Table, d, err)
			}
		}
	}
	tokens := func(l *Limiter) float64 {
		t.Helper()
		for range 100 {
			v, err := l.Tokens(ctx, "k")
			if err == nil {
				return v
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: no answer after the restart", l.s.Table)
		return 0
	}
	drain()
	srv.StopClean()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if u, l := tokens(unlogged), tokens(logged); u > 0.01 || l > 0.01 {
		t.Fatalf("after a clean restart: unlogged %v, logged %v tokens, want both drained", u, l)
	}
	srv.Stop() // immediate: crash recovery on the next start
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if u, l := tokens(unlogged), tokens(logged); u != 5 || l > 0.01 {
		t.Fatalf("after a crash: unlogged %v, logged %v tokens, want 5 (emptied table: full buckets) and drained", u, l)
	}
}

// TestTerminatedBackends: an administrator's pg_terminate_backend of every
// connection of the pool costs at most the calls in flight, classified, and
// never admits more than the burst.
func TestTerminatedBackends(t *testing.T) {
	srv, pool := ownPool(t, "pgstore-term", nil, Schema{})
	l := mustNew(t, pool, Config{Limit: 0.001, Burst: 40, Timeout: 5 * time.Second})
	ctx := context.Background()
	allowed, unknown, errs := 0, 0, 0
	take := func() {
		d, err := l.Take(ctx, "k", 1)
		switch {
		case err != nil:
			if !classified(err) {
				t.Fatalf("unclassified: %v", err)
			}
			errs++
			if errors.Is(err, engine.ErrOutcomeUnknown) {
				unknown++
			}
		case d.Allowed:
			allowed++
		}
	}
	for range 10 {
		take()
	}
	var killed int
	for range 3 {
		var n int
		c, err := pgx.Connect(ctx, srv.DSN())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgstore-term'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		c.Close(ctx)
		killed += n
		for range 10 {
			take()
		}
	}
	for range 30 {
		take()
	}
	if killed == 0 {
		t.Fatal("no backend terminated: the test proved nothing")
	}
	if allowed > 40 || allowed+unknown < 40 {
		t.Fatalf("%d allowed, %d outcome unknown, %d errors after %d backends terminated: want at most 40 allowed, and only unknown outcomes short of 40", allowed, unknown, errs, killed)
	}
	t.Logf("%d backends terminated: %d errors (%d outcome unknown), %d allowed", killed, errs, unknown, allowed)
}

// lockRow holds key's row of l locked in a transaction until the test ends
// or the returned function releases it.
func lockRow(t *testing.T, dsn string, l *Limiter, key string) func() {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+ident(l.s.Table)+` WHERE key = $1 FOR UPDATE) x`, []byte(l.KeyFor(key))).Scan(&n); err != nil || n != 1 {
		t.Fatalf("locking the row: %d rows, %v", n, err)
	}
	done := false
	release := func() {
		if !done {
			done = true
			tx.Rollback(ctx)
			c.Close(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// TestStuckLock: a transaction that holds a bucket's row lock and never
// ends delays takes of that key only to the deadline, after which the
// database itself gives up (lock_timeout), so the error says for certain
// that nothing was taken; peeks and denials, which lock nothing, are not
// delayed at all, nor are other keys.
func TestStuckLock(t *testing.T) {
	srv, pool := ownPool(t, "pgstore-lock", nil, Schema{})
	timeout := 400 * time.Millisecond
	l := mustNew(t, pool, Config{Limit: 0.001, Burst: 5, Timeout: timeout, OnFailure: FailClosed, BreakAfter: -1})
	ctx := context.Background()
	if d, err := l.Take(ctx, "k", 2); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	release := lockRow(t, srv.DSN(), l, "k")
	start := time.Now()
	d, err := l.Take(ctx, "k", 1)
	took := time.Since(start)
	var pe *pgconn.PgError
	if !errors.Is(err, engine.ErrUnavailable) || !errors.As(err, &pe) || pe.Code != "55P03" || d.Allowed {
		t.Fatalf("take under a stuck lock: %+v %v, want fail-closed with lock_timeout's error (55P03), classified unavailable", d, err)
	}
	if took < timeout/2 || took > timeout+2*time.Second {
		t.Fatalf("take under a stuck lock returned after %v, deadline %v", took, timeout)
	}
	start = time.Now()
	if v, err := l.Tokens(ctx, "k"); err != nil || v < 2.99 || v > 3.01 {
		t.Fatalf("peek under the lock: %v %v", v, err)
	}
	if d, err := l.Take(ctx, "k", 4); err != nil || d.Allowed {
		t.Fatalf("a denial under the lock: %+v %v", d, err)
	}
	if d, err := l.Take(ctx, "other", 1); err != nil || !d.Allowed {
		t.Fatalf("another key under the lock: %+v %v", d, err)
	}
	if took := time.Since(start); took > timeout/2 {
		t.Fatalf("a peek, a denial and another key's take took %v under the lock: they must not wait for it", took)
	}
	release()
	if d, err := l.Take(ctx, "k", 1); err != nil || !d.Allowed || d.Remaining < 1.99 || d.Remaining > 2.01 {
		t.Fatalf("after the lock is released: %+v %v, want the failed take not charged", d, err)
	}
}

// TestStatementTimeout: the database's statement_timeout cancelling a take
// is a failure that took nothing.
func TestStatementTimeout(t *testing.T) {
	srv, pool := ownPool(t, "pgstore-stmt", map[string]string{"statement_timeout": "200"}, Schema{})
	l := mustNew(t, pool, Config{Limit: 0.001, Burst: 5, Timeout: 5 * time.Second, BreakAfter: -1})
	ctx := context.Background()
	if d, err := l.Take(ctx, "k", 1); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	release := lockRow(t, srv.DSN(), l, "k")
	start := time.Now()
	d, err := l.Take(ctx, "k", 1)
	var pe *pgconn.PgError
	if !errors.Is(err, engine.ErrUnavailable) || !errors.As(err, &pe) || pe.Code != "57014" || !d.Allowed {
		t.Fatalf("take cancelled by statement_timeout: %+v %v, want fail-open with 57014, classified unavailable", d, err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("statement_timeout of 200 ms answered after %v", took)
	}
	release()
	if v, err := l.Tokens(ctx, "k"); err != nil || v < 3.99 || v > 4.01 {
		t.Fatalf("after the cancelled take: %v tokens, %v; want 4: nothing taken", v, err)
	}
}

// TestDoneContext: a call whose context has ended is not sent, and says
// that nothing was taken.
func TestDoneContext(t *testing.T) {
	pool := newDB(t, Schema{})
	l := mustNew(t, pool, Config{Limit: 1, Burst: 5, OnFailure: FailClosed})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := l.Take(ctx, "k", 1)
	if !errors.Is(err, engine.ErrUnavailable) || !errors.Is(err, context.Canceled) || d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	if s := l.Stats(); s.Calls != 0 || s.FailedClosed != 1 {
		t.Fatalf("stats %+v: want no statement sent, one fail-closed answer", s)
	}
}

// TestConnectFailureTookNothing: with every connection gone and the server
// refusing new ones, a call fails getting a connection, before sending
// anything: the error says that nothing was taken.
func TestConnectFailureTookNothing(t *testing.T) {
	srv, pool := ownPool(t, "pgstore-refused", nil, Schema{})
	l := mustNew(t, pool, Config{Limit: 1, Burst: 5, Timeout: 2 * time.Second, BreakAfter: -1})
	if _, err := l.Take(context.Background(), "k", 1); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	pool.Reset()
	for i := range 3 {
		_, err := l.Take(context.Background(), "k", 1)
		if !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("call %d to a server refusing connections: %v, want ErrUnavailable", i, err)
		}
	}
}

// TestBreakerIgnoresCallersAndRows: callers that give up and rows held by
// a stuck transaction do not open the breaker, which would lift the limit
// of every key: a client could do that on purpose by aborting requests.
func TestBreakerIgnoresCallersAndRows(t *testing.T) {
	srv, pool := ownPool(t, "pgstore-breaker", nil, Schema{})
	// The row lock gives up at nine tenths of Timeout, inside the
	// database: 100 ms before the deadline, a margin that a machine
	// loaded by parallel tests under the race detector keeps.
	l := mustNew(t, pool, Config{Limit: frozen, Burst: 5, Timeout: time.Second, BreakAfter: 2, BreakFor: time.Hour})
	ctx := context.Background()
	if d, err := l.Take(ctx, "stuck", 1); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	lockRow(t, srv.DSN(), l, "stuck")
	for range 3 {
		if _, err := l.Take(ctx, "stuck", 1); err == nil {
			t.Fatal("a take of a locked row succeeded")
		}
		gone, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.Take(gone, "k", 1); err == nil {
			t.Fatal("a take with a cancelled context succeeded")
		}
	}
	if d, err := l.Take(ctx, "other", 1); err != nil || !d.Allowed {
		t.Fatalf("another key after locked rows and cancelled callers: %+v %v, want the breaker closed", d, err)
	}
	if s := l.Stats(); s.Skipped != 0 {
		t.Fatalf("the breaker answered %d calls", s.Skipped)
	}
}

// TestStalledServer: a server that stops answering (SIGSTOP) costs each
// call its deadline, no more, and the breaker then answers at once; the
// server's return ends the outage.
func TestStalledServer(t *testing.T) {
	srv, pool := ownPool(t, "pgstore-stall", nil, Schema{})
	timeout := 300 * time.Millisecond
	l := mustNew(t, pool, Config{Limit: 1, Burst: 5, Timeout: timeout, OnFailure: FailClosed, BreakAfter: 3, BreakFor: 500 * time.Millisecond})
	ctx := context.Background()
	if _, err := l.Take(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	for i := range 5 {
		start := time.Now()
		d, err := l.Take(ctx, "k", 1)
		if took := time.Since(start); took > timeout+2*time.Second {
			t.Fatalf("call %d to a stalled server took %v, deadline %v", i, took, timeout)
		}
		if err == nil || !classified(err) || d.Allowed {
			t.Fatalf("call %d to a stalled server: %+v %v, want fail-closed with a classified error", i, d, err)
		}
		if i >= 3 && !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("call %d after 3 failures: %v, want the breaker's answer", i, err)
		}
	}
	srv.Resume()
	resumed = true
	deadline := time.Now().Add(20 * time.Second)
	for {
		if d, err := l.Take(ctx, "k2", 1); err == nil && d.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no success within 20 s of the server's return")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
