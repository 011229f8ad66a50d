package limitertest

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// granularity is how far a store with its own clock may round the time it
// reports a wait in, besides the time its calls take.
const granularity = 2 * time.Second

// runCase runs one subtest, failing it if it runs past timeout: a store
// that hangs fails that subtest, not the test binary.
func runCase(t *testing.T, name string, timeout time.Duration, run func(t *testing.T, ctx context.Context)) {
	t.Run(name, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		done := make(chan struct{})
		go func() {
			select {
			case <-done:
			case <-ctx.Done():
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					t.Errorf("%s: still running after %v: the store hangs", name, timeout)
				}
			}
		}()
		defer close(done)
		run(t, ctx)
	})
}

// storeSuite is the state of one subtest of a suite that binds its limiters
// through a Store (RunQuota, RunWindow).
type storeSuite struct {
	t     *testing.T
	ctx   context.Context
	store engine.Store
	now   func(t *testing.T) time.Time // the harness's Now
	ids   atomic.Int64
	// virtual is set when the store's limiters of the suite's shape
	// implement engine.TakerAt: the suite then passes every time itself,
	// at vnow.
	virtual bool
	vnow    time.Time
	// start is when the subtest began, for the refill allowance of a
	// token bucket on a store with its own clock.
	start time.Time
}

// openStore opens a subtest's Store with open, and learns its clock from
// a limiter of probe that it binds and releases.
func openStore(t *testing.T, ctx context.Context, open func(*testing.T) engine.Store, now func(*testing.T) time.Time,
	probe engine.Spec) *storeSuite {
	t.Helper()
	s := &storeSuite{t: t, ctx: ctx, now: now, start: time.Now()}
	s.store = open(t)
	if s.store == nil {
		t.Fatal("the harness's Store returned nil")
	}
	l, err := s.store.Bind(probe)
	if err != nil {
		t.Fatalf("Bind(%+v): %v", probe, err)
	}
	_, s.virtual = l.(engine.TakerAt)
	s.store.Release(l)
	if s.virtual {
		s.vnow = time.Unix(1_700_000_000, 0)
	}
	return s
}

// clock is the subtest's time: the virtual clock, or the store's.
func (s *storeSuite) clock() time.Time {
	switch {
	case s.virtual:
		return s.vnow
	case s.now != nil:
		return s.now(s.t)
	}
	return time.Now()
}

// wait lets d pass: on the virtual clock at once, else by sleeping.
func (s *storeSuite) wait(d time.Duration) {
	if s.virtual {
		s.vnow = s.vnow.Add(d)
		return
	}
	time.Sleep(d)
}

// elapsed is the real time since the subtest began: 0 on the virtual
// clock, which only the suite moves.
func (s *storeSuite) elapsed() time.Duration {
	if s.virtual {
		return 0
	}
	return time.Since(s.start)
}

// bind binds the limiter of spec under a new ID, released when the subtest
// ends.
func (s *storeSuite) bind(spec engine.Spec) engine.Limiter {
	s.t.Helper()
	spec.ID = spec.ID + "#" + strconv.FormatInt(s.ids.Add(1), 10)
	l, err := s.store.Bind(spec)
	if err != nil {
		s.t.Fatalf("Bind(%+v): %v", spec, err)
	}
	if l == nil {
		s.t.Fatalf("Bind(%+v) returned nil", spec)
	}
	s.t.Cleanup(func() { s.store.Release(l) })
	return l
}

// span is when a call was made: between before and after, on the clock
// the store decided by.
type span struct{ before, after time.Time }

// take takes n from key's limit l, now.
func (s *storeSuite) take(l engine.Limiter, key string, n float64) (engine.Decision, span) {
	s.t.Helper()
	return s.takeBy(l, key, n, nil)
}

// takeBy takes n from key's limit l, by cal (nil: l's own), now: with
// Take, or with TakeAll for a calendar of the take's own.
func (s *storeSuite) takeBy(l engine.Limiter, key string, n float64, cal *engine.Calendar) (engine.Decision, span) {
	s.t.Helper()
	out := make([]engine.Decision, 1)
	var sp span
	var err error
	if cal == nil {
		sp.before = s.clock()
		out[0], err = s.doTake(l, key, n)
		sp.after = s.clock()
	} else {
		_, sp, err = s.takeAll(l, []engine.Take{{Limiter: l, Key: key, N: n, Calendar: cal}}, out)
	}
	if err != nil {
		s.t.Fatalf("take of %v from %q: %v", n, key, err)
	}
	return out[0], sp
}

// doTake is l.Take, at the subtest's time.
func (s *storeSuite) doTake(l engine.Limiter, key string, n float64) (engine.Decision, error) {
	if s.virtual {
		out := make([]engine.Decision, 1)
		_, err := l.(engine.TakerAt).TakeAllAt(s.vnow, []engine.Take{{Limiter: l, Key: key, N: n}}, out)
		return out[0], err
	}
	return l.Take(s.ctx, key, n)
}

// takeAll is l.TakeAll, at the subtest's time.
func (s *storeSuite) takeAll(l engine.Limiter, takes []engine.Take, out []engine.Decision) (int, span, error) {
	if s.virtual {
		k, err := l.(engine.TakerAt).TakeAllAt(s.vnow, takes, out)
		return k, span{s.vnow, s.vnow}, err
	}
	before := s.clock()
	k, err := l.TakeAll(s.ctx, takes, out)
	return k, span{before, s.clock()}, err
}

// waits checks a wait, reported by a call made in sp, for the instant end:
// exact on the virtual clock, else within the call's span and the store's
// granularity.
func (s *storeSuite) waits(what string, got time.Duration, end time.Time, sp span) {
	s.t.Helper()
	lo, hi := end.Sub(sp.after), end.Sub(sp.before)
	if !s.virtual {
		lo, hi = lo-granularity, hi+granularity
	}
	if got < lo || got > hi {
		if lo == hi {
			s.t.Errorf("%s = %v, want %v, the time to %v", what, got, lo, end)
		} else {
			s.t.Errorf("%s = %v, want %v to %v, the time to %v", what, got, lo, hi, end)
		}
	}
}

// is checks a Remaining that the limit keeps exactly (nothing refills).
func (s *storeSuite) is(what string, got, want float64) {
	s.t.Helper()
	if math.Abs(got-want) > quantum/2 {
		s.t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// bucketLeft checks what key's token bucket l holds: want, plus the refill
// at limit a store with its own clock may have added since the subtest
// began.
func (s *storeSuite) bucketLeft(what string, l engine.Limiter, key string, want float64) {
	s.t.Helper()
	d, _ := s.take(l, key, 0)
	slack := quantum
	if !s.virtual {
		slack += float64(l.Limit()) * s.elapsed().Seconds()
	}
	if d.Remaining < want-quantum/2 || d.Remaining > want+slack {
		s.t.Errorf("%s: the bucket holds %v, want %v", what, d.Remaining, want)
	}
}
