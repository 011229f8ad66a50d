package limitertest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// QuotaHarness opens the store whose calendar quotas RunQuota checks.
type QuotaHarness struct {
	// Store returns a Store for one subtest, whose limiters share no key
	// with any other Store's: a fresh store, or a unique key prefix on a
	// shared one. The suite binds on it the quotas (engine.QuotaSpec) and
	// token buckets it takes from, which must accept each other in
	// TakeAll, and releases them when the subtest ends. Store registers
	// its own Close with t.Cleanup, and calls t.Skip with a sentence
	// naming what is missing when the store cannot be reached.
	Store func(t *testing.T) engine.Store
	// Now reads the clock the store decides periods by (a server's); nil
	// is this process's clock. A quota that implements engine.TakerAt
	// runs on a virtual clock that the suite drives instead.
	Now func(t *testing.T) time.Time
	// Timeout bounds each subtest, as Harness.Timeout. 0 means 30 s.
	Timeout time.Duration
}

// RunQuota runs the calendar quota conformance suite against the quotas
// that h's Store binds, one subtest per property, each on a Store of its
// own.
func RunQuota(t *testing.T, h QuotaHarness) {
	if h.Store == nil {
		t.Fatal("limitertest: QuotaHarness.Store is nil")
	}
	if h.Timeout == 0 {
		h.Timeout = 30 * time.Second
	}
	for _, c := range quotaCases {
		runCase(t, c.name, h.Timeout, func(t *testing.T, ctx context.Context) {
			s := &quotaSuite{storeSuite: openStore(t, ctx, h.Store, h.Now,
				engine.QuotaSpec("probe", "probe", 1, engine.Calendar{Period: engine.Monthly}))}
			s.own, s.other = farCalendars(s.clock())
			c.run(s)
		})
	}
}

var quotaCases = []struct {
	name string
	run  func(s *quotaSuite)
}{
	{"BindGivesTheSpec", quotaBind},
	{"NewKeyHasTheWholeQuota", quotaNewKey},
	{"RemainingCountsTakes", quotaCountsDown},
	{"DenialTakesNothingAndWaitsForThePeriodEnd", quotaDenial},
	{"PeekTakesNothing", quotaPeek},
	{"InvalidCosts", quotaInvalidCosts},
	{"KeysAreIndependent", quotaKeys},
	{"TakeAgreesWithTakeAll", quotaTakeAgrees},
	{"TakeAllWithATokenBucketIsAllOrNothing", quotaWithBucket},
	{"TakeCalendarSetsANewKeysPeriod", quotaTakeCalendar},
	{"ChangedCalendarKeepsWhatWasTaken", quotaCalendarKeeps},
	{"SetQuota", quotaSetQuota},
	{"ConcurrentTakesAdmitExactlyTheQuota", quotaConcurrent},
}

// quotaSuite is the state of one subtest of RunQuota.
type quotaSuite struct {
	*storeSuite
	// own is the calendar of the quotas bound, and other one whose
	// periods end on another day; neither has a period end within days
	// of the subtest's time.
	own, other engine.Calendar
}

// farCalendars returns two monthly calendars whose periods end at least
// eight days from now, on different days: their anchors, 1 to 28, exist
// in every month.
func farCalendars(now time.Time) (own, other engine.Calendar) {
	d := now.UTC().Day()
	return engine.Calendar{Period: engine.Monthly, Day: (d+9)%28 + 1},
		engine.Calendar{Period: engine.Monthly, Day: (d+18)%28 + 1}
}

// quota binds a quota of n per period of the subtest's own calendar.
func (s *quotaSuite) quota(n float64) engine.Limiter {
	s.t.Helper()
	return s.bind(engine.QuotaSpec("quota", "quota", n, s.own))
}

// end is where the period of cal that holds the call sp ends.
func (s *quotaSuite) end(cal engine.Calendar, sp span) time.Time {
	s.t.Helper()
	_, end := cal.Bounds(sp.before)
	if _, e := cal.Bounds(sp.after); !e.Equal(end) {
		s.t.Fatalf("a period of %+v ended between %v and %v, while the subtest ran", cal, sp.before, sp.after)
	}
	return end
}

// quotaN is the quota of the subtests that count.
const quotaN = 10

func quotaBind(s *quotaSuite) {
	l := s.quota(quotaN)
	if l.Burst() != quotaN {
		s.t.Errorf("Burst() = %v, want the quota, %v", l.Burst(), float64(quotaN))
	}
	if want := engine.Limit(quotaN / s.own.Period.Nominal().Seconds()); math.Abs(float64(l.Limit()-want)) > float64(want)*1e-9 {
		s.t.Errorf("Limit() = %v, want %v, the quota over a nominal month", l.Limit(), want)
	}
	if r, ok := l.(engine.QuotaRetuner); ok && r.Calendar() != s.own {
		s.t.Errorf("Calendar() = %+v, want %+v, the Spec's", r.Calendar(), s.own)
	}
	if bad, err := s.store.Bind(engine.QuotaSpec("bad", "bad", 0, s.own)); err == nil {
		s.store.Release(bad)
		s.t.Errorf("Bind of a quota of 0 succeeded, want an error")
	}
}

func quotaNewKey(s *quotaSuite) {
	l := s.quota(quotaN)
	if d, _ := s.take(l, "new", 0); !d.Allowed || d.RetryAfter != 0 || d.ResetAfter != 0 {
		s.t.Errorf("peek of a new key = %+v, want allowed with RetryAfter and ResetAfter 0", d)
	} else {
		s.is("Remaining of a new key", d.Remaining, quotaN)
	}
	d, sp := s.take(l, "new", quotaN)
	if !d.Allowed {
		s.t.Fatalf("take of the whole quota of a new key = %+v, want allowed", d)
	}
	s.is("Remaining after the whole quota", d.Remaining, 0)
	s.waits("ResetAfter after the whole quota", d.ResetAfter, s.end(s.own, sp), sp)
}

func quotaCountsDown(s *quotaSuite) {
	l := s.quota(quotaN)
	left := float64(quotaN)
	for _, n := range []float64{1, 0.5, 2.25, 0.001, 3} {
		left -= n
		d, sp := s.take(l, "k", n)
		if !d.Allowed || d.RetryAfter != 0 {
			s.t.Fatalf("take of %v with %v left = %+v, want allowed with RetryAfter 0", n, left+n, d)
		}
		s.is(fmt.Sprintf("Remaining after taking %v", n), d.Remaining, left)
		s.waits(fmt.Sprintf("ResetAfter after taking %v", n), d.ResetAfter, s.end(s.own, sp), sp)
	}
}

func quotaDenial(s *quotaSuite) {
	l := s.quota(quotaN)
	s.take(l, "k", quotaN-2)
	for i := range 3 {
		d, sp := s.take(l, "k", 3)
		if d.Allowed {
			s.t.Fatalf("take %d of 3 with 2 left = %+v, want denied", i, d)
		}
		end := s.end(s.own, sp)
		s.waits(fmt.Sprintf("denial %d: RetryAfter", i), d.RetryAfter, end, sp)
		s.waits(fmt.Sprintf("denial %d: ResetAfter", i), d.ResetAfter, end, sp)
		s.is(fmt.Sprintf("denial %d: Remaining", i), d.Remaining, 2)
	}
	if d, _ := s.take(l, "k", 2); !d.Allowed {
		s.t.Fatalf("the 2 left after three denials: %+v, want allowed", d)
	}
	d, sp := s.take(l, "k", quantum)
	if d.Allowed {
		s.t.Fatalf("take of %v from a spent quota = %+v, want denied", quantum, d)
	}
	s.waits("RetryAfter of a spent quota", d.RetryAfter, s.end(s.own, sp), sp)
}

func quotaPeek(s *quotaSuite) {
	l := s.quota(quotaN)
	s.take(l, "k", 3)
	for i := range 3 {
		d, sp := s.take(l, "k", 0)
		if !d.Allowed || d.RetryAfter != 0 {
			s.t.Errorf("peek %d = %+v, want allowed with RetryAfter 0", i, d)
		}
		s.is(fmt.Sprintf("peek %d: Remaining", i), d.Remaining, quotaN-3)
		s.waits(fmt.Sprintf("peek %d: ResetAfter", i), d.ResetAfter, s.end(s.own, sp), sp)
	}
	d, _ := s.take(l, "k", 1)
	s.is("Remaining of the take after the peeks", d.Remaining, quotaN-4)
	s.take(l, "k", quotaN-4)
	if d, _ := s.take(l, "k", 0); !d.Allowed || d.RetryAfter != 0 || d.Remaining != 0 {
		s.t.Errorf("peek of a spent quota = %+v, want allowed with nothing left and RetryAfter 0", d)
	}
}

func quotaInvalidCosts(s *quotaSuite) {
	l := s.quota(quotaN)
	s.take(l, "k", 1)
	for _, key := range []string{"k", "new"} {
		for _, n := range []float64{quotaN + quantum, quotaN + 1, -1, -quantum, math.NaN(), math.Inf(1), math.Inf(-1)} {
			if d, _ := s.take(l, key, n); d.Allowed || d.RetryAfter != engine.InfDuration {
				s.t.Errorf("cost %v from %q = %+v, want denied with RetryAfter InfDuration", n, key, d)
			}
		}
	}
	d, _ := s.take(l, "k", 0)
	s.is("Remaining of k after the invalid costs", d.Remaining, quotaN-1)
	if d, _ := s.take(l, "new", 0); d.ResetAfter != 0 {
		s.t.Errorf("peek of a key only ever given invalid costs = %+v, want ResetAfter 0 (nothing taken)", d)
	} else {
		s.is("Remaining of a key only ever given invalid costs", d.Remaining, quotaN)
	}
}

func quotaKeys(s *quotaSuite) {
	l := s.quota(quotaN)
	keys := []string{"", "a", "b", "A", "a ", "{a}", "%7Ba%7D", "ключ", string(make([]byte, 300))}
	for i, k := range keys {
		if d, _ := s.take(l, k, float64(i+1)); !d.Allowed {
			s.t.Fatalf("first take of %d from key %q = %+v, want allowed", i+1, k, d)
		}
	}
	for i, k := range keys {
		d, _ := s.take(l, k, 0)
		s.is(fmt.Sprintf("Remaining of key %q", k), d.Remaining, quotaN-float64(i+1))
	}
	// Quotas bound apart share no key either.
	d, _ := s.take(s.quota(quotaN), "a", 0)
	s.is("Remaining of key \"a\" of another quota", d.Remaining, quotaN)
}

func quotaTakeAgrees(s *quotaSuite) {
	l := s.quota(quotaN)
	out := make([]engine.Decision, 1)
	for i, n := range []float64{4, 4, 4, 0, 2, quotaN + 1} {
		k, _, err := s.takeAll(l, []engine.Take{{Limiter: l, Key: "all", N: n}}, out)
		if err != nil {
			s.t.Fatalf("TakeAll: %v", err)
		}
		d, _ := s.take(l, "one", n)
		if d.Allowed != (k == -1) || d.Allowed != out[0].Allowed {
			s.t.Errorf("take %d of %v: Take = %+v, TakeAll = %d, %+v; want the same decision", i, n, d, k, out[0])
		}
		s.is(fmt.Sprintf("take %d: TakeAll's Remaining", i), out[0].Remaining, d.Remaining)
		for _, w := range []struct {
			name          string
			take, takeAll time.Duration
		}{{"RetryAfter", d.RetryAfter, out[0].RetryAfter}, {"ResetAfter", d.ResetAfter, out[0].ResetAfter}} {
			if diff := w.take - w.takeAll; (w.take == 0) != (w.takeAll == 0) || diff < -granularity || diff > granularity ||
				s.virtual && diff != 0 {
				s.t.Errorf("take %d of %v: %s of Take = %v, of TakeAll = %v; want the same", i, n, w.name, w.take, w.takeAll)
			}
		}
	}
}

// The token bucket of quotaWithBucket: a slow refill, so that a store
// with its own clock adds little while the subtest runs.
const (
	bucketLimit engine.Limit = 0.01
	bucketBurst              = 2
)

func quotaWithBucket(s *quotaSuite) {
	q := s.quota(quotaN)
	b := s.bind(engine.Spec{ID: "bucket", Name: "bucket", Limit: bucketLimit, Burst: bucketBurst})
	out := make([]engine.Decision, 2)
	// Both have room: both are taken from.
	k, _, err := s.takeAll(q, []engine.Take{{Limiter: q, Key: "k", N: 3}, {Limiter: b, Key: "k", N: 1}}, out)
	if err != nil || k != -1 {
		s.t.Fatalf("TakeAll with room in both = %d, %v, %+v; want -1, nil", k, err, out)
	}
	s.is("the quota's Remaining after a TakeAll of 3", out[0].Remaining, quotaN-3)
	s.bucketLeft("after a TakeAll of 1", b, "k", bucketBurst-1)

	// The bucket denies: the quota keeps what it had.
	s.take(b, "k", 1)
	k, _, err = s.takeAll(q, []engine.Take{{Limiter: q, Key: "k", N: 3}, {Limiter: b, Key: "k", N: 1}}, out)
	if err != nil || k != 1 || out[0].Allowed || out[1].Allowed || out[1].RetryAfter <= 0 {
		s.t.Errorf("TakeAll with an empty bucket = %d, %v, %+v; want 1, nil, nothing allowed, the bucket waiting", k, err, out)
	}
	s.is("the quota's Remaining reported by the TakeAll the bucket denied", out[0].Remaining, quotaN-3)
	d, _ := s.take(q, "k", 0)
	s.is("the quota after the TakeAll the bucket denied", d.Remaining, quotaN-3)

	// The quota denies: the bucket keeps its tokens, whichever limiter's
	// TakeAll is called.
	s.take(q, "j", quotaN)
	for _, via := range []engine.Limiter{q, b} {
		k, sp, err := s.takeAll(via, []engine.Take{{Limiter: b, Key: "j", N: 1}, {Limiter: q, Key: "j", N: 1}}, out)
		if err != nil || k != 1 || out[0].Allowed || out[1].Allowed {
			s.t.Errorf("TakeAll with a spent quota = %d, %v, %+v; want 1, nil, nothing allowed", k, err, out)
		}
		s.waits("RetryAfter of the spent quota in a TakeAll", out[1].RetryAfter, s.end(s.own, sp), sp)
		s.bucketLeft("after the TakeAll the quota denied", b, "j", bucketBurst)
	}
	d, _ = s.take(q, "j", 0)
	s.is("the spent quota after the denied TakeAlls", d.Remaining, 0)
}

func quotaTakeCalendar(s *quotaSuite) {
	l := s.quota(quotaN)
	d, sp := s.takeBy(l, "k", 1, &s.other)
	if !d.Allowed {
		s.t.Fatalf("take of 1 from a new key by another calendar = %+v, want allowed", d)
	}
	otherEnd, ownEnd := s.end(s.other, sp), s.end(s.own, sp)
	if d := otherEnd.Sub(ownEnd); d > -24*time.Hour && d < 24*time.Hour {
		s.t.Fatalf("the calendars' periods end %v apart, want days: the subtest cannot tell them", d)
	}
	s.waits("ResetAfter of a new key by the take's calendar", d.ResetAfter, otherEnd, sp)
	// The key stays in the period it began, by whichever calendar.
	d, sp = s.take(l, "k", 1)
	s.is("Remaining after a take by the quota's own calendar", d.Remaining, quotaN-2)
	s.waits("ResetAfter by the quota's own calendar", d.ResetAfter, otherEnd, sp)
	// A key of the quota's own calendar is apart from it.
	d, sp = s.take(l, "j", 1)
	s.waits("ResetAfter of a new key by the quota's calendar", d.ResetAfter, ownEnd, sp)
}

func quotaCalendarKeeps(s *quotaSuite) {
	l := s.quota(quotaN)
	s.take(l, "k", quotaN)
	for i := range 2 {
		d, sp := s.takeBy(l, "k", 1, &s.other)
		if d.Allowed {
			s.t.Fatalf("take %d from a spent key by a calendar of another anchor = %+v, want denied", i, d)
		}
		s.waits("RetryAfter by another anchor", d.RetryAfter, s.end(s.own, sp), sp)
	}
	d, _ := s.take(l, "k", 0)
	s.is("the key after takes by another anchor", d.Remaining, 0)
}

func quotaSetQuota(s *quotaSuite) {
	l := s.quota(quotaN)
	r, ok := l.(engine.QuotaRetuner)
	if !ok {
		s.t.Skip("the quota is not an engine.QuotaRetuner: its quota cannot change in place")
	}
	s.take(l, "k", quotaN)
	if err := r.SetQuota(quotaN+3, s.own); err != nil {
		s.t.Fatalf("SetQuota(%v): %v", quotaN+3, err)
	}
	if l.Burst() != quotaN+3 {
		s.t.Errorf("Burst() after SetQuota = %v, want %v", l.Burst(), float64(quotaN+3))
	}
	d, sp := s.take(l, "k", 3)
	if !d.Allowed {
		s.t.Fatalf("take of the 3 a raise gave = %+v, want allowed", d)
	}
	s.is("Remaining after taking the raise", d.Remaining, 0)
	s.waits("ResetAfter after the raise", d.ResetAfter, s.end(s.own, sp), sp)

	// A new calendar keeps the key's period and what it took.
	if err := r.SetQuota(quotaN+4, s.other); err != nil {
		s.t.Fatalf("SetQuota(%v, another anchor): %v", quotaN+4, err)
	}
	if r.Calendar() != s.other {
		s.t.Errorf("Calendar() after SetQuota = %+v, want %+v", r.Calendar(), s.other)
	}
	d, sp = s.take(l, "k", 2)
	if d.Allowed {
		s.t.Fatalf("take of 2 with 1 left after a new calendar = %+v, want denied", d)
	}
	s.is("Remaining after a new calendar", d.Remaining, 1)
	s.waits("RetryAfter after a new calendar", d.RetryAfter, s.end(s.own, sp), sp)
	d, sp = s.take(l, "new", 1)
	s.waits("ResetAfter of a new key after a new calendar", d.ResetAfter, s.end(s.other, sp), sp)

	if err := r.SetQuota(0, s.own); err == nil {
		s.t.Errorf("SetQuota(0) succeeded, want an error")
	}
	if l.Burst() != quotaN+4 || r.Calendar() != s.other {
		s.t.Errorf("after a refused SetQuota: Burst() = %v, Calendar() = %+v; want %v, %+v unchanged",
			l.Burst(), r.Calendar(), float64(quotaN+4), s.other)
	}
}

func quotaConcurrent(s *quotaSuite) {
	const quota = 40
	l := s.quota(quota)
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
	if got := admitted.Load(); got != quota {
		s.t.Errorf("%d goroutines × %d takes on one key admitted %d, want exactly the quota, %d", goroutines, each, got, quota)
	}
}
