package redisstore

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// Faults: what each failure policy answers when Redis dies, stops, sleeps,
// loses its scripts or answers slowly, and that nothing is admitted beyond
// the policy's bound: with FailClosed, never more than the bucket allows;
// with Fallback, the store's admissions plus at most the local share; with
// FailOpen, every admission the store did not make is counted in FailedOpen.

// policies returns a FailOpen, a FailClosed and a Fallback (half the limit)
// Limiter on one client, each with its own prefix, burst 10 and no refill to
// speak of.
func policies(t *testing.T, addr string, timeout time.Duration) (open, closed, fallback *Limiter) {
	t.Helper()
	c := newRue(t, addr)
	mk := func(prefix string, p FailurePolicy, share float64) *Limiter {
		l, err := New(c, Config{Limit: 1.0 / 3600, Burst: 10, Prefix: prefix, Timeout: timeout,
			OnFailure: p, FallbackShare: share, BreakAfter: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	return mk("open:", FailOpen, 0), mk("closed:", FailClosed, 0), mk("fallback:", Fallback, 0.5)
}

// tally makes n calls of one token on key and counts the outcomes.
func tally(l *Limiter, key string, n int) (allowed, errs int) {
	for range n {
		d, err := l.Take(context.Background(), key, 1)
		if d.Allowed {
			allowed++
		}
		if err != nil {
			errs++
		}
	}
	return allowed, errs
}

func TestServerKilled(t *testing.T) {
	s := redistest.Start(t)
	open, closed, fallback := policies(t, s.Addr(), time.Second)
	for _, l := range []*Limiter{open, closed, fallback} {
		if a, e := tally(l, "k", 4); a != 4 || e != 0 {
			t.Fatalf("%v before the kill: %d allowed, %d errors", l.s.OnFailure, a, e)
		}
	}
	s.Kill()
	if a, e := tally(open, "k", 20); a != 20 || e != 20 {
		t.Fatalf("fail-open: %d allowed, %d errors of 20, want 20 and 20", a, e)
	}
	if a, e := tally(closed, "k", 20); a != 0 || e != 20 {
		t.Fatalf("fail-closed: %d allowed, %d errors of 20, want 0 and 20", a, e)
	}
	// The local engine holds half the burst: 5 tokens, whatever the store
	// had left.
	if a, e := tally(fallback, "k", 20); a != 5 || e != 20 {
		t.Fatalf("fallback: %d allowed, %d errors of 20, want 5 and 20", a, e)
	}
	so, sc, sf := open.Stats(), closed.Stats(), fallback.Stats()
	if so.StoreErrors != 20 || so.FailedOpen != 20 || sc.FailedClosed != 20 || sf.Fallback != 20 || so.Allowed != 4 {
		t.Fatalf("stats: open %+v closed %+v fallback %+v", so, sc, sf)
	}
	// Back on the same port, empty (no persistence): the client reconnects
	// and the store decides again.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, closed, "probe")
	if a, e := tally(closed, "k", 20); a != 10 || e != 0 {
		t.Fatalf("fail-closed after restart: %d allowed, %d errors of 20, want a fresh bucket of 10", a, e)
	}
}

// waitHealthy retries until the store answers (a restarted server, a
// resumed process).
func waitHealthy(t *testing.T, l *Limiter, key string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := l.Tokens(context.Background(), key); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("store still failing: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKilledMidRun kills the server while goroutines take from one bucket:
// fail-closed callers are admitted no more than the bucket held, and every
// failed call is a denial.
func TestKilledMidRun(t *testing.T) {
	s := redistest.Start(t)
	_, closed, _ := policies(t, s.Addr(), time.Second)
	var allowed, failedAllowed, errs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := closed.Take(context.Background(), "k", 0.01)
				switch {
				case err != nil:
					errs.Add(1)
					if d.Allowed {
						failedAllowed.Add(1)
					}
				case d.Allowed:
					allowed.Add(1)
				}
			}
		})
	}
	// Let some takes through (the bucket holds 1000 of them), then kill.
	for closed.Stats().Allowed < 100 {
		time.Sleep(time.Millisecond)
	}
	s.Kill()
	for closed.Stats().StoreErrors < 50 {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if a := allowed.Load(); a > 1000 {
		t.Fatalf("%d admitted, the bucket held 1000", a)
	}
	if failedAllowed.Load() != 0 || errs.Load() == 0 {
		t.Fatalf("%d failed calls allowed, %d errors: want none allowed, some errors", failedAllowed.Load(), errs.Load())
	}
}

// TestServerStopped pauses the server (SIGSTOP): calls time out at their
// deadline and get the policy's answer. The takes that timed out were sent,
// and may run once the server resumes: the store then counts tokens the
// caller was not given, never the other way round.
func TestServerStopped(t *testing.T) {
	s := redistest.Start(t)
	open, closed, fallback := policies(t, s.Addr(), 300*time.Millisecond)
	start := time.Now()
	for _, l := range []*Limiter{open, closed, fallback} {
		if a, e := tally(l, "k", 3); a != 3 || e != 0 {
			t.Fatalf("%v: %d allowed, %d errors", l.s.OnFailure, a, e)
		}
	}
	signal(t, s, syscall.SIGSTOP)
	ao, eo := tally(open, "k", 5)
	ac, ec := tally(closed, "k", 5)
	af, ef := tally(fallback, "k", 5)
	signal(t, s, syscall.SIGCONT)
	if ao != 5 || eo != 5 || ac != 0 || ec != 5 || af != 5 || ef != 5 {
		t.Fatalf("while stopped: open %d/%d, closed %d/%d, fallback %d/%d (allowed/errors of 5)", ao, eo, ac, ec, af, ef)
	}
	for _, l := range []*Limiter{open, closed, fallback} {
		waitHealthy(t, l, "k")
		left, err := l.Tokens(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		// 3 were given; the 5 that timed out may or may not have run. The
		// bucket also refills at 1 token an hour while the test runs: a
		// quantum (0.001) every 3.6 s, which a loaded machine can reach.
		most := 7 + math.Ceil(time.Since(start).Hours()*1000)/1000
		if left > most || left < 2 {
			t.Fatalf("%v: bucket holds %v after 3 takes and 5 timed out, want 2..%v", l.s.OnFailure, left, most)
		}
	}
}

// TestDebugSleep: a server busy in DEBUG SLEEP longer than the deadline is a
// failure answered by the policy; one shorter than the deadline is only slow,
// and the decisions are the store's, exact.
func TestDebugSleep(t *testing.T) {
	s := redistest.Start(t)
	_, closed, _ := policies(t, s.Addr(), 300*time.Millisecond)
	slowOK, err := New(newRue(t, s.Addr()), Config{Limit: 1.0 / 3600, Burst: 10, Prefix: "slow:", Timeout: 5 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	// sleep starts a DEBUG SLEEP and returns once the server has been seen
	// busy `confirm` times in a row: a ping slow for a loaded machine's
	// own reasons must not pass for the sleep, or the calls would go
	// before it. It returns early if the sleep ends unseen.
	sleep := func(seconds string, confirm int) (done chan struct{}) {
		done = make(chan struct{})
		go func() {
			defer close(done)
			admin(t, s.Addr(), "DEBUG", "SLEEP", seconds)
		}()
		for seen := 0; seen < confirm; {
			select {
			case <-done:
				return done
			default:
			}
			if serverBusy(s.Addr()) {
				seen++
			} else {
				seen = 0
				time.Sleep(time.Millisecond)
			}
		}
		return done
	}
	// go-redis honours the deadline too, with ContextTimeoutEnabled.
	gclosed, err := NewGoRedis(newGoRedis(t, s.Addr()), Config{Limit: 1.0 / 3600, Burst: 10, Prefix: "gr:", Timeout: 300 * time.Millisecond, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	done := sleep("3", 3)
	a, e := tally(closed, "k", 3)
	ga, ge := tally(gclosed, "k", 3)
	<-done
	if a != 0 || e != 3 || ga != 0 || ge != 3 {
		t.Fatalf("during a 3 s sleep with a 300 ms deadline: rueidis %d allowed, %d errors of 3; go-redis %d, %d", a, e, ga, ge)
	}
	done = sleep("0.2", 1)
	a, e = tally(slowOK, "k", 12)
	<-done
	if a != 10 || e != 0 {
		t.Fatalf("during a 0.2 s sleep with a 5 s deadline: %d allowed, %d errors of 12, want 10 and 0", a, e)
	}
}

// serverBusy reports that addr does not answer PING within 20 ms.
func serverBusy(addr string) bool {
	c := newGoRedisNoT(addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	return c.Ping(ctx).Err() != nil
}

// TestScriptFlush: after SCRIPT FLUSH the first EVALSHA gets NOSCRIPT, the
// client reloads the script with EVAL, and no take is lost or made twice.
func TestScriptFlush(t *testing.T) {
	s := redistest.Start(t)
	for _, tc := range []struct {
		name string
		new  func(Config) (*Limiter, error)
	}{
		{"rueidis", func(c Config) (*Limiter, error) { return New(newRue(t, s.Addr()), c) }},
		{"go-redis", func(c Config) (*Limiter, error) { return NewGoRedis(newGoRedis(t, s.Addr()), c) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.new(Config{Limit: 1.0 / 3600, Burst: 100, Prefix: tc.name + ":", Timeout: 5 * time.Second, OnFailure: FailClosed})
			if err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				if a, e := tally(l, "k", 10); a != 10 || e != 0 {
					t.Fatalf("round %d: %d allowed, %d errors of 10", round, a, e)
				}
				admin(t, s.Addr(), "SCRIPT", "FLUSH")
			}
			left, err := l.Tokens(context.Background(), "k")
			if err != nil || left != 70 {
				t.Fatalf("bucket holds %v (%v) after 30 takes across flushes, want 70", left, err)
			}
		})
	}
}

// TestBreaker: after BreakAfter consecutive failures the Limiter stops
// asking Redis and answers by its policy at once, with ErrBreakerOpen.
func TestBreaker(t *testing.T) {
	s := redistest.Start(t)
	l, err := New(newRue(t, s.Addr()), Config{Limit: 1, Burst: 10, Timeout: time.Second,
		OnFailure: FailClosed, BreakAfter: 3, BreakFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Kill()
	var breaker int
	for range 10 {
		d, err := l.Take(context.Background(), "k", 1)
		if err == nil || d.Allowed {
			t.Fatalf("with the server gone: %+v, %v", d, err)
		}
		if errors.Is(err, ErrBreakerOpen) {
			breaker++
		}
	}
	if st := l.Stats(); breaker != 7 || st.Skipped != 7 || st.StoreErrors != 10 || st.FailedClosed != 10 {
		t.Fatalf("%d answered by the breaker, stats %+v; want 7 skipped of 10 errors", breaker, st)
	}
}

// TestTakeAllOnFailure: when the store fails, a TakeAll answers by the
// policies of its takes together: any FailClosed take denies the call, the
// Fallback takes are decided by their local engines all or none, and
// FailOpen takes are allowed.
func TestTakeAllOnFailure(t *testing.T) {
	s := redistest.Start(t)
	open, closed, fallback := policies(t, s.Addr(), time.Second)
	s.Kill()
	out := make([]engine.Decision, 2)
	k, err := open.TakeAll(context.Background(), []engine.Take{{Limiter: open, Key: "k", N: 1}, {Limiter: closed, Key: "k", N: 1}}, out)
	if err == nil || k != 1 || out[0].Allowed || out[1].Allowed {
		t.Fatalf("open+closed: denied %d, %v, %+v; want the closed take denied, nothing allowed", k, err, out)
	}
	// The fallback engine holds 5 tokens: four calls of 1 pass with the
	// open take, then a take of 2 is denied by it.
	for i := range 4 {
		k, err = open.TakeAll(context.Background(), []engine.Take{{Limiter: open, Key: "k", N: 1}, {Limiter: fallback, Key: "k", N: 1}}, out)
		if err == nil || k != -1 || !out[0].Allowed || !out[1].Allowed {
			t.Fatalf("open+fallback %d: denied %d, %v, %+v", i, k, err, out)
		}
	}
	k, err = open.TakeAll(context.Background(), []engine.Take{{Limiter: open, Key: "k", N: 1}, {Limiter: fallback, Key: "k", N: 2}}, out)
	if err == nil || k != 1 || out[0].Allowed || out[1].Allowed || out[1].Remaining != 1 {
		t.Fatalf("open+fallback beyond the share: denied %d, %v, %+v", k, err, out)
	}
}

// While Redis is down, the fallback engine decides; a flood of new keys then
// fills its table to FallbackMaxKeys and no further, sharing its overflow
// bucket beyond, instead of growing the process without end.
func TestFallbackKeysAreBounded(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) // nothing listens
	l, err := NewGoRedis(newGoRedis(t, dead), Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 100 * time.Millisecond,
		OnFailure: Fallback, FallbackShare: 1, FallbackMaxKeys: 50, BreakAfter: 1, BreakFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	allowed := 0
	for i := range 1000 {
		d, err := l.Take(context.Background(), "key"+strconv.Itoa(i), 1)
		if err == nil {
			t.Fatalf("call %d with Redis down: no error", i)
		}
		if d.Allowed {
			allowed++
		}
	}
	if n := l.core.Fallback.Len(); n != 50 {
		t.Errorf("fallback engine holds %d buckets, want FallbackMaxKeys, 50", n)
	}
	if max := 50 + 10; allowed > max {
		t.Errorf("%d of 1000 new keys allowed: more than the 50 stored and one overflow burst of 10", allowed)
	}
}
