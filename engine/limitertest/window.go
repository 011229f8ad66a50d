package limitertest

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// WindowHarness opens the store whose strict windows RunWindow checks.
type WindowHarness struct {
	// Store returns a Store for one subtest, whose limiters share no key
	// with any other Store's: a fresh store, or a unique key prefix on a
	// shared one. The suite binds on it the windows (engine.WindowSpec)
	// and token buckets it takes from, which must accept each other in
	// TakeAll, and releases them when the subtest ends. Store registers
	// its own Close with t.Cleanup, and calls t.Skip with a sentence
	// naming what is missing when the store cannot be reached.
	Store func(t *testing.T) engine.Store
	// Now reads the clock the store decides by (a server's); nil is this
	// process's clock. A window that implements engine.TakerAt runs on a
	// virtual clock that the suite drives instead.
	Now func(t *testing.T) time.Time
	// Timeout bounds each subtest, as Harness.Timeout. 0 means 30 s.
	Timeout time.Duration
}

// RunWindow runs the strict window conformance suite against the windows
// that h's Store binds, one subtest per property, each on a Store of its
// own.
func RunWindow(t *testing.T, h WindowHarness) {
	if h.Store == nil {
		t.Fatal("limitertest: WindowHarness.Store is nil")
	}
	if h.Timeout == 0 {
		h.Timeout = 30 * time.Second
	}
	for _, c := range windowCases {
		runCase(t, c.name, h.Timeout, func(t *testing.T, ctx context.Context) {
			c.run(&windowSuite{openStore(t, ctx, h.Store, h.Now, engine.WindowSpec("probe", "probe", 1, time.Hour, 0))})
		})
	}
}

var windowCases = []struct {
	name string
	run  func(s *windowSuite)
}{
	{"BindGivesTheSpec", windowBind},
	{"NewKeyHasTheWholeLimit", windowNewKey},
	{"RemainingCountsTakes", windowCountsDown},
	{"DenialTakesNothing", windowDenial},
	{"PeekTakesNothing", windowPeek},
	{"InvalidCosts", windowInvalidCosts},
	{"KeysAreIndependent", windowKeys},
	{"TakeAgreesWithTakeAll", windowTakeAgrees},
	{"TakeAllWithATokenBucketIsAllOrNothing", windowWithBucket},
	{"RetryAfterIsTruthful", windowRetryAfter},
	{"ResetAfterIsTruthful", windowResetAfter},
	{"NeverMoreThanTheLimitInAnySpan", windowStrict},
	{"SetLimitTokens", windowSetLimit},
	{"ConcurrentTakesAdmitExactlyTheLimit", windowConcurrent},
}

// windowSuite is the state of one subtest of RunWindow.
type windowSuite struct{ *storeSuite }

// The windows of the suite: a long one, that nothing leaves while a
// subtest counts, and a short one to wait for in real time.
const (
	windowN     = 10
	longWindow  = time.Hour
	shortWindow = time.Second
	windowSlots = 4
	longSlot    = longWindow / windowSlots
	shortSlot   = shortWindow / windowSlots
	windowLimit = engine.Limit(windowN / 3600.0)
)

// window binds a window of n in any span of span, in windowSlots slots.
func (s *windowSuite) window(n float64, span time.Duration) engine.Limiter {
	s.t.Helper()
	return s.bind(engine.WindowSpec("window", "window", n, span, windowSlots))
}

// within checks a wait that must be between lo and hi: exactly so on the
// virtual clock, within the store's granularity otherwise.
func (s *windowSuite) within(what string, got, lo, hi time.Duration) {
	s.t.Helper()
	if !s.virtual {
		lo, hi = lo-granularity, hi+granularity
	}
	if got < lo || got > hi {
		s.t.Errorf("%s = %v, want %v to %v", what, got, lo, hi)
	}
}

func windowBind(s *windowSuite) {
	l := s.window(windowN, longWindow)
	if l.Burst() != windowN {
		s.t.Errorf("Burst() = %v, want the limit, %v", l.Burst(), float64(windowN))
	}
	if math.Abs(float64(l.Limit()-windowLimit)) > float64(windowLimit)*1e-9 {
		s.t.Errorf("Limit() = %v, want %v, the limit over the window", l.Limit(), windowLimit)
	}
	if bad, err := s.store.Bind(engine.WindowSpec("bad", "bad", 0, longWindow, windowSlots)); err == nil {
		s.store.Release(bad)
		s.t.Errorf("Bind of a window of limit 0 succeeded, want an error")
	}
}

func windowNewKey(s *windowSuite) {
	l := s.window(windowN, longWindow)
	if d, _ := s.take(l, "new", 0); !d.Allowed || d.RetryAfter != 0 || d.ResetAfter != 0 {
		s.t.Errorf("peek of a new key = %+v, want allowed with RetryAfter and ResetAfter 0", d)
	} else {
		s.is("Remaining of a new key", d.Remaining, windowN)
	}
	d, _ := s.take(l, "new", windowN)
	if !d.Allowed {
		s.t.Fatalf("take of the whole limit of a new key = %+v, want allowed", d)
	}
	s.is("Remaining after the whole limit", d.Remaining, 0)
	// Not before a whole window has passed, at most a slot later.
	s.within("ResetAfter after the whole limit", d.ResetAfter, longWindow, longWindow+longSlot)
}

func windowCountsDown(s *windowSuite) {
	l := s.window(windowN, longWindow)
	left := float64(windowN)
	for _, n := range []float64{1, 0.5, 2.25, 0.001, 3} {
		left -= n
		d, _ := s.take(l, "k", n)
		if !d.Allowed || d.RetryAfter != 0 {
			s.t.Fatalf("take of %v with %v left = %+v, want allowed with RetryAfter 0", n, left+n, d)
		}
		s.is(fmt.Sprintf("Remaining after taking %v", n), d.Remaining, left)
		s.within(fmt.Sprintf("ResetAfter after taking %v", n), d.ResetAfter, longWindow-s.elapsed(), longWindow+longSlot)
	}
}

func windowDenial(s *windowSuite) {
	l := s.window(windowN, longWindow)
	s.take(l, "k", windowN-2)
	for i := range 3 {
		d, _ := s.take(l, "k", 3)
		if d.Allowed {
			s.t.Fatalf("take %d of 3 with 2 left = %+v, want denied", i, d)
		}
		s.within(fmt.Sprintf("denial %d: RetryAfter", i), d.RetryAfter, longWindow-s.elapsed(), longWindow+longSlot)
		s.is(fmt.Sprintf("denial %d: Remaining", i), d.Remaining, 2)
	}
	if d, _ := s.take(l, "k", 2); !d.Allowed {
		s.t.Fatalf("the 2 left after three denials: %+v, want allowed", d)
	}
	if d, _ := s.take(l, "k", quantum); d.Allowed || d.RetryAfter <= 0 || d.RetryAfter == engine.InfDuration {
		s.t.Errorf("take of %v from a full window = %+v, want denied with a finite wait", quantum, d)
	}
}

func windowPeek(s *windowSuite) {
	l := s.window(windowN, longWindow)
	s.take(l, "k", 3)
	for i := range 3 {
		d, _ := s.take(l, "k", 0)
		if !d.Allowed || d.RetryAfter != 0 || d.ResetAfter <= 0 {
			s.t.Errorf("peek %d = %+v, want allowed with RetryAfter 0 and a ResetAfter", i, d)
		}
		s.is(fmt.Sprintf("peek %d: Remaining", i), d.Remaining, windowN-3)
	}
	d, _ := s.take(l, "k", 1)
	s.is("Remaining of the take after the peeks", d.Remaining, windowN-4)
}

func windowInvalidCosts(s *windowSuite) {
	l := s.window(windowN, longWindow)
	s.take(l, "k", 1)
	for _, key := range []string{"k", "new"} {
		for _, n := range []float64{windowN + quantum, windowN + 1, -1, -quantum, math.NaN(), math.Inf(1), math.Inf(-1)} {
			if d, _ := s.take(l, key, n); d.Allowed || d.RetryAfter != engine.InfDuration {
				s.t.Errorf("cost %v from %q = %+v, want denied with RetryAfter InfDuration", n, key, d)
			}
		}
	}
	d, _ := s.take(l, "k", 0)
	s.is("Remaining of k after the invalid costs", d.Remaining, windowN-1)
	if d, _ := s.take(l, "new", 0); d.ResetAfter != 0 {
		s.t.Errorf("peek of a key only ever given invalid costs = %+v, want ResetAfter 0 (nothing taken)", d)
	} else {
		s.is("Remaining of a key only ever given invalid costs", d.Remaining, windowN)
	}
}

func windowKeys(s *windowSuite) {
	l := s.window(windowN, longWindow)
	keys := []string{"", "a", "b", "A", "a ", "{a}", "%7Ba%7D", "ключ", string(make([]byte, 300))}
	for i, k := range keys {
		if d, _ := s.take(l, k, float64(i+1)); !d.Allowed {
			s.t.Fatalf("first take of %d from key %q = %+v, want allowed", i+1, k, d)
		}
	}
	for i, k := range keys {
		d, _ := s.take(l, k, 0)
		s.is(fmt.Sprintf("Remaining of key %q", k), d.Remaining, windowN-float64(i+1))
	}
	d, _ := s.take(s.window(windowN, longWindow), "a", 0)
	s.is("Remaining of key \"a\" of another window", d.Remaining, windowN)
}

func windowTakeAgrees(s *windowSuite) {
	l := s.window(windowN, longWindow)
	out := make([]engine.Decision, 1)
	for i, n := range []float64{4, 4, 4, 0, 2, windowN + 1} {
		k, _, err := s.takeAll(l, []engine.Take{{Limiter: l, Key: "all", N: n}}, out)
		if err != nil {
			s.t.Fatalf("TakeAll: %v", err)
		}
		d, _ := s.take(l, "one", n)
		if d.Allowed != (k == -1) || d.Allowed != out[0].Allowed {
			s.t.Errorf("take %d of %v: Take = %+v, TakeAll = %d, %+v; want the same decision", i, n, d, k, out[0])
		}
		s.is(fmt.Sprintf("take %d: TakeAll's Remaining", i), out[0].Remaining, d.Remaining)
		if (d.RetryAfter == 0) != (out[0].RetryAfter == 0) || (d.RetryAfter == engine.InfDuration) != (out[0].RetryAfter == engine.InfDuration) {
			s.t.Errorf("take %d of %v: RetryAfter of Take = %v, of TakeAll = %v; want the same", i, n, d.RetryAfter, out[0].RetryAfter)
		}
	}
}

func windowWithBucket(s *windowSuite) {
	w := s.window(windowN, longWindow)
	b := s.bind(engine.Spec{ID: "bucket", Name: "bucket", Limit: bucketLimit, Burst: bucketBurst})
	out := make([]engine.Decision, 2)
	k, _, err := s.takeAll(w, []engine.Take{{Limiter: w, Key: "k", N: 3}, {Limiter: b, Key: "k", N: 1}}, out)
	if err != nil || k != -1 {
		s.t.Fatalf("TakeAll with room in both = %d, %v, %+v; want -1, nil", k, err, out)
	}
	s.is("the window's Remaining after a TakeAll of 3", out[0].Remaining, windowN-3)
	s.bucketLeft("after a TakeAll of 1", b, "k", bucketBurst-1)

	// The bucket denies: the window keeps what it had.
	s.take(b, "k", 1)
	k, _, err = s.takeAll(w, []engine.Take{{Limiter: w, Key: "k", N: 3}, {Limiter: b, Key: "k", N: 1}}, out)
	if err != nil || k != 1 || out[0].Allowed || out[1].Allowed || out[1].RetryAfter <= 0 {
		s.t.Errorf("TakeAll with an empty bucket = %d, %v, %+v; want 1, nil, nothing allowed, the bucket waiting", k, err, out)
	}
	d, _ := s.take(w, "k", 0)
	s.is("the window after the TakeAll the bucket denied", d.Remaining, windowN-3)

	// The window denies: the bucket keeps its tokens, whichever limiter's
	// TakeAll is called.
	s.take(w, "j", windowN)
	for _, via := range []engine.Limiter{w, b} {
		k, _, err := s.takeAll(via, []engine.Take{{Limiter: b, Key: "j", N: 1}, {Limiter: w, Key: "j", N: 1}}, out)
		if err != nil || k != 1 || out[0].Allowed || out[1].Allowed || out[1].RetryAfter <= 0 {
			s.t.Errorf("TakeAll with a full window = %d, %v, %+v; want 1, nil, nothing allowed, the window waiting", k, err, out)
		}
		s.bucketLeft("after the TakeAll the window denied", b, "j", bucketBurst)
	}
	d, _ = s.take(w, "j", 0)
	s.is("the full window after the denied TakeAlls", d.Remaining, 0)
}

func windowRetryAfter(s *windowSuite) {
	l := s.window(windowN, shortWindow)
	s.take(l, "k", windowN/2)
	s.wait(2 * shortSlot)
	s.take(l, "k", windowN/2)
	d, _ := s.take(l, "k", 1)
	if d.Allowed {
		s.t.Fatalf("take of 1 from a full window = %+v, want denied", d)
	}
	// The first half leaves no sooner than a window after it was taken,
	// and what one slot more may hold.
	s.within("RetryAfter", d.RetryAfter, shortWindow-2*shortSlot-s.elapsed(), shortWindow+shortSlot)
	if s.virtual {
		s.wait(d.RetryAfter - time.Nanosecond)
		if e, _ := s.take(l, "k", 1); e.Allowed {
			s.t.Errorf("1 ns before RetryAfter (%v) the take was allowed: %+v", d.RetryAfter, e)
		}
		s.wait(time.Nanosecond)
	} else {
		s.wait(d.RetryAfter)
	}
	if e, _ := s.take(l, "k", 1); !e.Allowed {
		s.t.Errorf("after RetryAfter (%v) the take = %+v, want allowed", d.RetryAfter, e)
	}
}

func windowResetAfter(s *windowSuite) {
	l := s.window(windowN, shortWindow)
	s.take(l, "k", 2)
	s.wait(shortSlot)
	d, _ := s.take(l, "k", 3)
	if !d.Allowed {
		s.t.Fatalf("take of 3 with 8 left = %+v, want allowed", d)
	}
	s.within("ResetAfter", d.ResetAfter, shortWindow, shortWindow+shortSlot)
	if s.virtual {
		s.wait(d.ResetAfter - time.Nanosecond)
		if p, _ := s.take(l, "k", 0); p.Remaining == windowN || p.ResetAfter == 0 {
			s.t.Errorf("1 ns before ResetAfter (%v) a peek = %+v, want the window not yet empty", d.ResetAfter, p)
		}
		s.wait(time.Nanosecond)
	} else {
		s.wait(d.ResetAfter)
	}
	if p, _ := s.take(l, "k", 0); p.Remaining != windowN || p.ResetAfter != 0 {
		s.t.Errorf("after ResetAfter (%v) a peek = %+v, want the whole limit (%v) and ResetAfter 0", d.ResetAfter, p, float64(windowN))
	}
}

// windowStrict has a client take, every twentieth of a window for three
// windows, costs that cycle, then at gaps a little short of a window from
// late in a slot, and checks
// every span of the window on the store's clock: it never holds more than
// the limit. On the virtual clock it also checks the floor Window
// documents: a steady client gets at least Slots/(Slots+1) of the limit
// per window.
func windowStrict(s *windowSuite) {
	const n = 5
	l := s.window(n, shortWindow)
	type admitted struct {
		sp   span
		cost float64
	}
	var got []admitted
	take := func(cost float64) bool {
		d, sp := s.take(l, "k", cost)
		if d.Allowed {
			got = append(got, admitted{sp, cost})
		}
		return d.Allowed
	}
	const unit = shortWindow / 20
	steady := 0.0
	costs := []float64{1, 0.5, 2, 1}
	for i := range 60 {
		if cost := costs[i%len(costs)]; take(cost) {
			steady += cost
		}
		s.wait(unit)
	}
	// Once the steady takes have left, takes late in a slot, then a
	// little less than a window later (a unit is a fifth of a slot): the
	// oldest slot a take reads is still in its window.
	s.wait(24 * unit)
	for _, step := range []struct {
		cost float64
		gap  time.Duration
	}{{1, 19}, {n, 19}, {n / 2, 17}, {n, 0}} {
		take(step.cost)
		s.wait(step.gap * unit)
	}
	// The admitted takes whose calls began at or after one's beginning and
	// ended less than a window after it were all decided in a span of the
	// window on the store's clock.
	sort.Slice(got, func(i, j int) bool { return got[i].sp.before.Before(got[j].sp.before) })
	for i, a := range got {
		sum := 0.0
		for _, b := range got[i:] {
			if b.sp.after.Sub(a.sp.before) < shortWindow {
				sum += b.cost
			}
		}
		if sum > n+quantum/2 {
			s.t.Fatalf("the takes from %v admitted %v within a window, want at most the limit, %v", a.sp.before, sum, float64(n))
		}
	}
	if floor := 3 * n * float64(windowSlots) / (windowSlots + 1); s.virtual && steady < floor-2-quantum/2 {
		s.t.Errorf("a steady client got %v in 3 windows, want at least %v (the floor, less the costs a slot may strand)", steady, floor-2)
	}
}

// limitTokensSetter is what a window that changes its limit in place
// implements (engine.Window).
type limitTokensSetter interface {
	SetLimitTokens(n float64) error
}

func windowSetLimit(s *windowSuite) {
	l := s.window(windowN, longWindow)
	r, ok := l.(limitTokensSetter)
	if !ok {
		s.t.Skip("the window has no SetLimitTokens: its limit cannot change in place")
	}
	s.take(l, "k", windowN)
	if err := r.SetLimitTokens(windowN + 3); err != nil {
		s.t.Fatalf("SetLimitTokens(%v): %v", windowN+3, err)
	}
	if l.Burst() != windowN+3 {
		s.t.Errorf("Burst() after SetLimitTokens = %v, want %v", l.Burst(), float64(windowN+3))
	}
	d, _ := s.take(l, "k", 3)
	if !d.Allowed {
		s.t.Fatalf("take of the 3 a raise gave = %+v, want allowed", d)
	}
	s.is("Remaining after taking the raise", d.Remaining, 0)
	if err := r.SetLimitTokens(windowN); err != nil {
		s.t.Fatalf("SetLimitTokens(%v): %v", windowN, err)
	}
	if d, _ := s.take(l, "k", quantum); d.Allowed || d.Remaining != 0 {
		s.t.Errorf("take from a key above a lowered limit = %+v, want denied with nothing left", d)
	}
	if err := r.SetLimitTokens(0); err == nil {
		s.t.Errorf("SetLimitTokens(0) succeeded, want an error")
	}
	if l.Burst() != windowN {
		s.t.Errorf("Burst() after a refused SetLimitTokens = %v, want %v unchanged", l.Burst(), float64(windowN))
	}
}

func windowConcurrent(s *windowSuite) {
	const limit = 40
	l := s.window(limit, longWindow)
	const goroutines, each = 8, 10
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range each {
				d, err := s.doTake(l, "hot", 1)
				if err != nil {
					errs <- err
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		s.t.Fatalf("Take: %v", err)
	}
	if got := admitted.Load(); got != limit {
		s.t.Errorf("%d goroutines × %d takes on one key admitted %d, want exactly the limit, %d", goroutines, each, got, limit)
	}
}
