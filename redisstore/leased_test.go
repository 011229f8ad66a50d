package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// limiterOfLeased is the Limiter a Leased limiter leases from.
func limiterOfLeased(s *Leased) *Limiter { return s.Store().(*Limiter) }

func newLeasedOn(t *testing.T, addr string, limit engine.Limit, burst float64, opts LeaseOptions) *Leased {
	t.Helper()
	l, err := newLimiter(rueClient{newRue(t, addr)}, Config{Limit: limit, Burst: burst, Prefix: "leased:", Timeout: 10 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewLeased(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); l.Close() })
	return s
}

// Instances sharing one key through leases admit together at most the
// bound of one bucket, Burst + Limit × span, however their goroutines race;
// and most of it.
func TestLeasedInstancesKeepTheBound(t *testing.T) {
	srv := redistest.Start(t)
	const limit, burst = 200, 20
	var instances []*Leased
	for range 3 {
		instances = append(instances, newLeasedOn(t, srv.Addr(), limit, burst, LeaseOptions{Lifetime: 200 * time.Millisecond, MaxShare: 0.25}))
	}
	var admitted, checks atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stopAt := start.Add(time.Second)
	for i := range 12 {
		s := instances[i%3]
		wg.Go(func() {
			for time.Now().Before(stopAt) {
				d, err := s.Take(context.Background(), "hot", 1)
				if err != nil {
					t.Error(err)
					return
				}
				checks.Add(1)
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	span := time.Since(start).Seconds()
	bound := burst + limit*span
	if got := float64(admitted.Load()); got > bound {
		t.Errorf("3 instances admitted %v in %.3f s, above Burst + Limit × span = %.1f", got, span, bound)
	}
	var scripts uint64
	for _, s := range instances {
		scripts += limiterOfLeased(s).Stats().Scripts
	}
	t.Logf("admitted %d of %d checks in %.3f s (bound %.1f, %.1f%% of it); %d scripts", admitted.Load(), checks.Load(), span, bound, 100*float64(admitted.Load())/bound, scripts)
	if got := float64(admitted.Load()); got < 0.5*limit*span {
		t.Errorf("admitted %v, under half of Limit × span (%.1f): leases strand tokens", got, limit*span)
	}
}

// A steady caller is decided locally: after the first leases, Redis sees a
// small share of the checks.
func TestLeasedDecidesLocally(t *testing.T) {
	srv := redistest.Start(t)
	s := newLeasedOn(t, srv.Addr(), 1e6, 1e6, LeaseOptions{})
	const n = 20000
	for i := range n {
		if d, err := s.Take(context.Background(), "k", 1); err != nil || !d.Allowed {
			t.Fatalf("check %d: %+v, %v", i, d, err)
		}
	}
	if scripts := limiterOfLeased(s).Stats().Scripts; scripts > n/20 {
		t.Errorf("%d checks sent %d scripts to Redis, want at most 5%%", n, scripts)
	}

	var l engine.Limiter = s
	if a := testing.AllocsPerRun(1000, func() { l.Take(context.Background(), "k", 1) }); a != 0 {
		t.Errorf("a check its lease covers allocates %v times, want 0", a)
	}
}

// When the shared bucket cannot grant, the instance denies locally until
// the bucket can, with a RetryAfter that is never early.
func TestLeasedDeniesLocallyUntilRetryAfter(t *testing.T) {
	srv := redistest.Start(t)
	s := newLeasedOn(t, srv.Addr(), 20, 2, LeaseOptions{MaxShare: 1})
	ctx := context.Background()
	for range 2 {
		if d, err := s.Take(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("draining: %+v, %v", d, err)
		}
	}
	before := limiterOfLeased(s).Stats().Scripts
	d, err := s.Take(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("empty bucket: %+v, %v; want a denial with a wait", d, err)
	}
	for range 50 {
		if e, _ := s.Take(ctx, "k", 1); e.Allowed {
			t.Fatal("admitted while denied locally")
		}
	}
	if sent := limiterOfLeased(s).Stats().Scripts - before; sent > 1 {
		t.Errorf("51 denials sent %d scripts, want at most 1", sent)
	}
	time.Sleep(d.RetryAfter)
	if e, err := s.Take(ctx, "k", 1); err != nil || !e.Allowed {
		t.Errorf("after RetryAfter (%v): %+v, %v; want admitted", d.RetryAfter, e, err)
	}
}

// Misuse and bad costs are as every Limiter's: errors, and denials that
// can never pass.
func TestLeasedMisuse(t *testing.T) {
	srv := redistest.Start(t)
	s := newLeasedOn(t, srv.Addr(), 10, 5, LeaseOptions{})
	ctx := context.Background()
	if d, err := s.Take(ctx, "k", 6); err != nil || d.Allowed || d.RetryAfter != engine.InfDuration {
		t.Errorf("cost above the burst: %+v, %v", d, err)
	}
	var nilLeased *Leased
	if _, err := nilLeased.Take(ctx, "k", 1); !errors.Is(err, engine.ErrNilLimiter) {
		t.Errorf("nil Leased: %v", err)
	}
	if _, err := s.TakeAll(ctx, []engine.Take{{Limiter: s, Key: "a", N: 1}}, nil); !errors.Is(err, engine.ErrShortOut) {
		t.Errorf("short out: %v", err)
	}
	if _, err := s.TakeAll(ctx, []engine.Take{{Limiter: limiterOfLeased(s), Key: "a", N: 1}}, make([]engine.Decision, 1)); !errors.Is(err, engine.ErrForeignTake) {
		t.Errorf("a per-check Limiter's take: %v", err)
	}
	for _, o := range []LeaseOptions{{Lifetime: time.Millisecond}, {MaxShare: 1.5}, {MaxShare: -1}, {MaxKeys: -1}} {
		if _, err := NewLeased(limiterOfLeased(s), o); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewLeased(%+v) = %v, want ErrInvalidConfig", o, err)
		}
	}
}

// A steady caller below the limit never waits for Redis once its demand is
// measured: the next lease is fetched when half of the current one is left.
func TestLeasedFetchesAhead(t *testing.T) {
	srv := redistest.Start(t)
	// Leases of at most 100 tokens, and a caller at about 10,000 checks a
	// second: a lease lasts about 10 ms, and half of one is far more than
	// a round trip.
	s := newLeasedOn(t, srv.Addr(), 1e5, 1e5, LeaseOptions{MaxShare: 0.001})
	const n = 2000
	for i := range n {
		if d, err := s.Take(context.Background(), "k", 1); err != nil || !d.Allowed {
			t.Fatalf("check %d: %+v, %v", i, d, err)
		}
		time.Sleep(50 * time.Microsecond)
	}
	scripts := limiterOfLeased(s).Stats().Scripts
	// A loaded machine may delay a fetch past half a lease now and then;
	// without fetching ahead every lease is waited for.
	if w := s.Stats().Waited; w > 3+scripts/10 {
		t.Errorf("%d checks over %d leases waited for one %d times, want at most %d (the next lease comes ahead of need)", n, scripts, w, 3+scripts/10)
	}
	if scripts < n/100 {
		t.Errorf("%d scripts for %d checks in leases of at most 100 tokens: the test did not exercise leases", scripts, n)
	}
}

// When Redis fails, a lease in hand keeps being spent without it; once it
// runs out, the Limiter's failure policy answers (FailClosed here), with an
// error that says nothing was taken.
func TestLeasedOutlivesAStoreFailure(t *testing.T) {
	srv := redistest.Start(t)
	l, err := newLimiter(rueClient{newRue(t, srv.Addr())}, Config{Limit: 0.001, Burst: 100, Prefix: "failing:", Timeout: 200 * time.Millisecond, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewLeased(l, LeaseOptions{MaxShare: 1, Lifetime: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	// Two checks: the second lease is sized from the demand, as much as
	// the bucket holds.
	for range 2 {
		if d, err := s.Take(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
	}
	// A peek reports what the instance's lease holds.
	held, _ := s.Take(ctx, "k", 0)
	left := int64(held.Remaining)
	if left < 10 {
		t.Fatalf("the lease holds %d tokens, want most of the burst", left)
	}
	srv.Kill()
	for i := range left {
		if d, err := s.Take(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("check %d of the %d the lease holds, with Redis down: %+v, %v", i, left, d, err)
		}
	}
	d, err := s.Take(ctx, "k", 1)
	if d.Allowed || !errors.Is(err, engine.ErrUnavailable) && !errors.Is(err, engine.ErrOutcomeUnknown) {
		t.Errorf("with the lease spent and Redis down: %+v, %v; want FailClosed's denial and a store error", d, err)
	}
}
