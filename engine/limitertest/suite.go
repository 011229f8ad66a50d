package limitertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Harness opens the limiters of the implementation under test.
type Harness struct {
	// Open returns a new Limiter with limit and burst whose buckets no other
	// Limiter shares: a fresh store, or a unique key prefix on a shared
	// one. Limiters opened in one subtest must accept each other in TakeAll
	// (for a remote store: the same connection). Open registers the
	// Limiter's Close with t.Cleanup, and calls t.Skip with a sentence
	// naming what is missing when the store cannot be reached.
	Open func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter
	// Timeout bounds each subtest: a store that hangs fails that subtest,
	// not the test binary. 0 means 30 s.
	Timeout time.Duration
	// Leased declares a limiter that decides from tokens it holds in a
	// lease of a shared bucket (lease.Leased): Remaining is what its
	// lease holds, between 0 and what the bucket would hold; ResetAfter is
	// 0; and RetryAfter is never early but may be later. The suite checks
	// those in place of the exact figures.
	Leased bool
}

// quantum is the resolution of Remaining.
const quantum = 0.001

// Run runs the conformance suite against h, one subtest per property, each
// with limiters of its own.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("limitertest: Harness.Open is nil")
	}
	if h.Timeout == 0 {
		h.Timeout = 30 * time.Second
	}
	for _, c := range cases {
		runCase(t, c.name, h.Timeout, func(t *testing.T, ctx context.Context) {
			c.run(&suite{t: t, h: h, ctx: ctx})
		})
	}
}

// suite is the state of one subtest.
type suite struct {
	t   *testing.T
	h   Harness
	ctx context.Context
	// virtual is set once a limiter implements engine.TakerAt: the suite
	// then passes every time itself, from now on.
	virtual bool
	now     time.Time
	// start is when the subtest began, on the real clock, for the refill
	// allowance of a store with its own time.
	start time.Time
}

var cases = []struct {
	name string
	run  func(s *suite)
}{
	{"LimitAndBurst", limitAndBurst},
	{"StartsFull", startsFull},
	{"PeekTakesNothing", peekTakesNothing},
	{"DenialTakesNothing", denialTakesNothing},
	{"InvalidCosts", invalidCosts},
	{"RemainingCountsTakes", remainingCountsTakes},
	{"RetryAfterIsTruthful", retryAfterIsTruthful},
	{"ResetAfterIsTruthful", resetAfterIsTruthful},
	{"KeysAreIndependent", keysAreIndependent},
	{"TakeAgreesWithTakeAll", takeAgreesWithTakeAll},
	{"TakeAllIsAllOrNothing", takeAllIsAllOrNothing},
	{"TakeAllReportsTheNeverSatisfiableTake", takeAllNeverFirst},
	{"TakeAllMisuseIsAnError", takeAllMisuse},
	{"ConcurrentTakesAdmitExactlyTheBurst", concurrentExact},
	{"Retune", retune},
}

// open opens a limiter and decides the clock of the subtest.
func (s *suite) open(limit engine.Limit, burst float64) engine.Limiter {
	s.t.Helper()
	l := s.h.Open(s.t, limit, burst)
	if l == nil {
		s.t.Fatalf("Open(%v, %v) returned nil", limit, burst)
	}
	if _, ok := l.(engine.TakerAt); ok && (s.start.IsZero() || s.virtual) {
		s.virtual, s.now = true, time.Unix(1_700_000_000, 0)
	}
	if s.start.IsZero() {
		s.start = time.Now()
	}
	return l
}

// take takes n from key's bucket of l, now.
func (s *suite) take(l engine.Limiter, key string, n float64) engine.Decision {
	s.t.Helper()
	var d engine.Decision
	var err error
	if at, ok := l.(engine.TakerAt); ok && s.virtual {
		out := make([]engine.Decision, 1)
		_, err = at.TakeAllAt(s.now, []engine.Take{{Limiter: l, Key: key, N: n}}, out)
		d = out[0]
	} else {
		d, err = l.Take(s.ctx, key, n)
	}
	if err != nil {
		s.t.Fatalf("Take(%q, %v): %v", key, n, err)
	}
	return d
}

// takeAll is l.TakeAll, at the subtest's time.
func (s *suite) takeAll(l engine.Limiter, takes []engine.Take, out []engine.Decision) (int, error) {
	if at, ok := l.(engine.TakerAt); ok && s.virtual {
		return at.TakeAllAt(s.now, takes, out)
	}
	return l.TakeAll(s.ctx, takes, out)
}

// wait lets d pass: on the virtual clock at once, else by sleeping.
func (s *suite) wait(d time.Duration) {
	if s.virtual {
		s.now = s.now.Add(d)
		return
	}
	time.Sleep(d)
}

// slack is the refill a store with its own clock may have added since the
// subtest began: 0 on the virtual clock, where every figure is exact.
func (s *suite) slack(limit engine.Limit) float64 {
	if s.virtual {
		return 0
	}
	return float64(limit)*time.Since(s.start).Seconds() + quantum
}

// remaining checks a Remaining: near want, or for a Leased limiter between
// 0 and want+slack.
func (s *suite) remaining(what string, got, want, slack float64) {
	s.t.Helper()
	if !s.h.Leased {
		s.near(what, got, want, slack)
		return
	}
	if got < 0 || got > want+slack+quantum/2 {
		s.t.Errorf("%s = %v, want 0 to %v (what a lease holds)", what, got, want+slack)
	}
}

// near fails unless got is in [want, want+slack], in quanta.
func (s *suite) near(what string, got, want, slack float64) {
	s.t.Helper()
	if got < want-quantum/2 || got > want+slack+quantum/2 {
		if slack == 0 {
			s.t.Errorf("%s = %v, want %v", what, got, want)
		} else {
			s.t.Errorf("%s = %v, want %v to %v", what, got, want, want+slack)
		}
	}
}

// A slow limit for the subtests that count tokens: a real clock adds at
// most a few thousandths of a token in the time they take.
const (
	slowLimit engine.Limit = 0.01
	slowBurst              = 10
)

func limitAndBurst(s *suite) {
	l := s.open(slowLimit, slowBurst)
	if l.Limit() != slowLimit || l.Burst() != slowBurst {
		s.t.Errorf("Limit(), Burst() = %v, %v; want %v, %v", l.Limit(), l.Burst(), slowLimit, slowBurst)
	}
}

func startsFull(s *suite) {
	l := s.open(slowLimit, slowBurst)
	if d := s.take(l, "new", 0); !d.Allowed || d.ResetAfter != 0 {
		s.t.Errorf("peek of a new key = %+v, want allowed with ResetAfter 0", d)
	} else {
		s.remaining("Remaining of a new key", d.Remaining, slowBurst, 0)
	}
	if d := s.take(l, "new", slowBurst); !d.Allowed || d.Remaining > s.slack(slowLimit) {
		s.t.Errorf("taking the whole burst of a new key = %+v, want allowed with nothing left", d)
	}
}

func peekTakesNothing(s *suite) {
	l := s.open(slowLimit, slowBurst)
	s.take(l, "k", 3)
	for i := range 3 {
		d := s.take(l, "k", 0)
		if !d.Allowed || d.RetryAfter != 0 {
			s.t.Errorf("peek %d = %+v, want allowed with RetryAfter 0", i, d)
		}
		s.remaining(fmt.Sprintf("peek %d: Remaining", i), d.Remaining, slowBurst-3, s.slack(slowLimit))
	}
	s.remaining("Remaining of the take after the peeks", s.take(l, "k", 1).Remaining, slowBurst-4, s.slack(slowLimit))
}

func denialTakesNothing(s *suite) {
	l := s.open(slowLimit, slowBurst)
	s.take(l, "k", slowBurst-2)
	for i := range 5 {
		d := s.take(l, "k", 3)
		if d.Allowed {
			s.t.Fatalf("take %d of 3 with 2 left = %+v, want denied", i, d)
		}
		if d.RetryAfter <= 0 || d.RetryAfter == engine.InfDuration {
			s.t.Errorf("denial %d: RetryAfter = %v, want a finite positive wait", i, d.RetryAfter)
		}
		s.remaining(fmt.Sprintf("denial %d: Remaining", i), d.Remaining, 2, s.slack(slowLimit))
	}
	if d := s.take(l, "k", 2); !d.Allowed {
		s.t.Errorf("the 2 tokens left after five denials: %+v, want allowed", d)
	}
}

func invalidCosts(s *suite) {
	l := s.open(slowLimit, slowBurst)
	s.take(l, "k", 1)
	for _, n := range []float64{slowBurst + quantum, slowBurst + 1, -1, -quantum, math.NaN(), math.Inf(1), math.Inf(-1)} {
		d := s.take(l, "k", n)
		if d.Allowed || d.RetryAfter != engine.InfDuration {
			s.t.Errorf("cost %v = %+v, want denied with RetryAfter InfDuration", n, d)
		}
	}
	s.remaining("Remaining after the invalid costs", s.take(l, "k", 0).Remaining, slowBurst-1, s.slack(slowLimit))
}

func remainingCountsTakes(s *suite) {
	l := s.open(slowLimit, slowBurst)
	left := float64(slowBurst)
	for _, n := range []float64{1, 0.5, 2.25, 0.001, 3} {
		left -= n
		d := s.take(l, "k", n)
		if !d.Allowed {
			s.t.Fatalf("take of %v with %v left = %+v, want allowed", n, left+n, d)
		}
		s.remaining(fmt.Sprintf("Remaining after taking %v", n), d.Remaining, left, s.slack(slowLimit))
	}
}

// A limit fast enough to wait for in real time: a token every 25 ms.
const (
	fastLimit engine.Limit = 40
	fastBurst              = 4
)

func retryAfterIsTruthful(s *suite) {
	l := s.open(fastLimit, fastBurst)
	s.take(l, "k", fastBurst)
	d := s.take(l, "k", 2)
	if d.Allowed {
		s.t.Fatalf("take of 2 from an emptied bucket = %+v, want denied", d)
	}
	// The whole wait is at most the refill of 2 tokens (less what refilled
	// since the bucket was emptied), plus a tick of rounding.
	if full := time.Duration(2 / float64(fastLimit) * float64(time.Second)); d.RetryAfter <= 0 || d.RetryAfter == engine.InfDuration ||
		d.RetryAfter > full+time.Millisecond && !s.h.Leased {
		s.t.Fatalf("RetryAfter = %v, want in (0, %v]", d.RetryAfter, full)
	}
	if s.virtual {
		// Never early: a tick before, the take is still denied.
		s.wait(d.RetryAfter - time.Nanosecond)
		if e := s.take(l, "k", 2); e.Allowed {
			s.t.Errorf("1 ns before RetryAfter (%v) the take was allowed: %+v", d.RetryAfter, e)
		}
		s.wait(time.Nanosecond)
	} else {
		s.wait(d.RetryAfter)
	}
	if e := s.take(l, "k", 2); !e.Allowed {
		s.t.Errorf("after RetryAfter (%v) the take = %+v, want allowed", d.RetryAfter, e)
	}
}

func resetAfterIsTruthful(s *suite) {
	l := s.open(fastLimit, fastBurst)
	d := s.take(l, "k", 3)
	if s.h.Leased {
		if !d.Allowed || d.ResetAfter != 0 {
			s.t.Errorf("take of 3 = %+v, want allowed with ResetAfter 0 (a lease cannot know)", d)
		}
		return
	}
	want := time.Duration(3 / float64(fastLimit) * float64(time.Second))
	if !d.Allowed || d.ResetAfter <= 0 || d.ResetAfter > want+time.Millisecond {
		s.t.Fatalf("take of 3 = %+v, want allowed with ResetAfter in (0, %v]", d, want)
	}
	if s.virtual && d.ResetAfter < want {
		s.t.Errorf("ResetAfter = %v, want %v exactly on a frozen clock", d.ResetAfter, want)
	}
	s.wait(d.ResetAfter)
	if p := s.take(l, "k", 0); p.Remaining != fastBurst || p.ResetAfter != 0 {
		s.t.Errorf("after ResetAfter (%v) a peek = %+v, want a full bucket (%v) and ResetAfter 0", d.ResetAfter, p, float64(fastBurst))
	}
}

func keysAreIndependent(s *suite) {
	l := s.open(slowLimit, slowBurst)
	keys := []string{"", "a", "b", "A", "a ", "{a}", "%7Ba%7D", "ключ", string(make([]byte, 300))}
	for i, k := range keys {
		if d := s.take(l, k, float64(i+1)); !d.Allowed {
			s.t.Fatalf("first take of %d from key %q = %+v, want allowed", i+1, k, d)
		}
	}
	for i, k := range keys {
		s.remaining(fmt.Sprintf("Remaining of key %q", k), s.take(l, k, 0).Remaining, slowBurst-float64(i+1), s.slack(slowLimit))
	}
}

func takeAgreesWithTakeAll(s *suite) {
	l := s.open(slowLimit, slowBurst)
	out := make([]engine.Decision, 1)
	for i, n := range []float64{4, 4, 4, 0, 2} {
		k, err := s.takeAll(l, []engine.Take{{Limiter: l, Key: "all", N: n}}, out)
		if err != nil {
			s.t.Fatalf("TakeAll: %v", err)
		}
		d := s.take(l, "one", n)
		if d.Allowed != (k == -1) || d.Allowed != out[0].Allowed {
			s.t.Errorf("take %d of %v: Take = %+v, TakeAll = %d, %+v; want the same decision", i, n, d, k, out[0])
		}
		s.remaining(fmt.Sprintf("take %d: TakeAll's Remaining", i), out[0].Remaining, d.Remaining, s.slack(slowLimit))
	}
}

func takeAllIsAllOrNothing(s *suite) {
	a := s.open(slowLimit, slowBurst)
	b := s.open(slowLimit, 2)
	out := make([]engine.Decision, 3)
	takes := []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "k", N: 1}, {Limiter: a, Key: "j", N: 2}}
	for i, want := range []int{-1, -1, 1} {
		k, err := s.takeAll(a, takes, out)
		if err != nil {
			s.t.Fatalf("TakeAll %d: %v", i, err)
		}
		if k != want {
			s.t.Fatalf("TakeAll %d = %d, want %d", i, k, want)
		}
	}
	if out[1].Allowed || out[1].RetryAfter <= 0 || out[0].Allowed || out[2].Allowed {
		s.t.Errorf("denied TakeAll: out = %+v, want nothing allowed and take 1 waiting", out)
	}
	s.remaining("Remaining of a:k after the denied TakeAll", out[0].Remaining, slowBurst-2, s.slack(slowLimit))
	s.remaining("Remaining of a:j after the denied TakeAll", out[2].Remaining, slowBurst-4, s.slack(slowLimit))
	if out[0].RetryAfter != 0 || out[2].RetryAfter != 0 {
		s.t.Errorf("takes whose buckets hold enough report RetryAfter %v and %v, want 0", out[0].RetryAfter, out[2].RetryAfter)
	}
	s.remaining("a:k peeked after the denied TakeAll", s.take(a, "k", 0).Remaining, slowBurst-2, s.slack(slowLimit))
	s.remaining("a:j peeked after the denied TakeAll", s.take(a, "j", 0).Remaining, slowBurst-4, s.slack(slowLimit))
	if k, err := s.takeAll(a, nil, nil); k != -1 || err != nil {
		s.t.Errorf("TakeAll of no takes = %d, %v; want -1, nil", k, err)
	}
}

func takeAllNeverFirst(s *suite) {
	a := s.open(slowLimit, slowBurst)
	b := s.open(slowLimit, 2)
	s.take(b, "empty", 2)
	out := make([]engine.Decision, 3)
	// Take 1 is denied for now, take 2 for ever: the one reported is 2,
	// whatever the order, and nothing is taken.
	k, err := s.takeAll(a, []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "empty", N: 1}, {Limiter: a, Key: "k", N: slowBurst + 1}}, out)
	if err != nil {
		s.t.Fatal(err)
	}
	if k != 2 || out[2].RetryAfter != engine.InfDuration {
		s.t.Errorf("TakeAll = %d, out[2] = %+v; want 2 with RetryAfter InfDuration", k, out[2])
	}
	s.remaining("a:k after the refused TakeAll", s.take(a, "k", 0).Remaining, slowBurst, 0)
}

func takeAllMisuse(s *suite) {
	a := s.open(slowLimit, slowBurst)
	for _, tt := range []struct {
		name  string
		takes []engine.Take
		out   int
		want  error
	}{
		{"short out", []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: a, Key: "j", N: 1}}, 1, engine.ErrShortOut},
		{"nil Limiter", []engine.Take{{Limiter: a, Key: "k", N: 1}, {Key: "j", N: 1}}, 2, engine.ErrNilLimiter},
		{"foreign Limiter", []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: stranger{}, Key: "j", N: 1}}, 2, engine.ErrForeignTake},
	} {
		_, err := s.takeAll(a, tt.takes, make([]engine.Decision, tt.out))
		if !errors.Is(err, tt.want) {
			s.t.Errorf("%s: err = %v, want one wrapping %v", tt.name, err, tt.want)
		}
	}
	s.remaining("a:k after the refused calls", s.take(a, "k", 0).Remaining, slowBurst, 0)
}

// stranger is a Limiter of no store.
type stranger struct{}

func (stranger) Take(context.Context, string, float64) (engine.Decision, error) {
	return engine.Decision{}, errors.New("stranger")
}
func (stranger) TakeAll(context.Context, []engine.Take, []engine.Decision) (int, error) {
	return -1, errors.New("stranger")
}
func (stranger) Limit() engine.Limit { return 1 }
func (stranger) Burst() float64      { return 1 }
func (stranger) Close() error        { return nil }

func concurrentExact(s *suite) {
	const burst = 40
	// One token per 1e4 s: no refill worth a token while the test runs.
	l := s.open(1e-4, burst)
	const goroutines, each = 8, 10
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range each {
				var d engine.Decision
				var err error
				if s.virtual {
					out := make([]engine.Decision, 1)
					_, err = l.(engine.TakerAt).TakeAllAt(s.now, []engine.Take{{Limiter: l, Key: "hot", N: 1}}, out)
					d = out[0]
				} else {
					d, err = l.Take(s.ctx, "hot", 1)
				}
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
	if got := admitted.Load(); got != burst {
		s.t.Errorf("%d goroutines × %d takes on one key admitted %d, want exactly the burst, %d", goroutines, each, got, burst)
	}
}

func retune(s *suite) {
	l := s.open(slowLimit, slowBurst)
	r, ok := l.(engine.Retuner)
	if !ok {
		s.t.Skip("the limiter is not an engine.Retuner: its limit cannot change in place")
	}
	s.take(l, "k", 4)
	at := s.now
	if !s.virtual {
		at = time.Now()
	}
	if err := r.SetAt(at, slowLimit, 5); err != nil {
		s.t.Fatalf("SetAt(burst 5): %v", err)
	}
	if l.Burst() != 5 {
		s.t.Errorf("Burst() after SetAt = %v, want 5", l.Burst())
	}
	s.remaining("k after a cut of the burst to 5", s.take(l, "k", 0).Remaining, 5, s.slack(slowLimit))
	if err := r.SetAt(at, 0, 5); err == nil {
		s.t.Errorf("SetAt(limit 0) succeeded, want an error")
	}
	if l.Limit() != slowLimit {
		s.t.Errorf("Limit() after a refused SetAt = %v, want %v unchanged", l.Limit(), slowLimit)
	}
}
