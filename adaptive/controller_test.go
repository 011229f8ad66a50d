package adaptive

import (
	"testing"
	"time"
)

// clock is a virtual clock for the tests, from an arbitrary instant.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// feed makes n observations of latency over the second before step s
// (steps are one second apart, from t0), failed as said, evenly spread.
func feed(c *Controller, s, n int, latency time.Duration, failed bool) {
	from := t0.Add(time.Duration(s-1) * time.Second)
	for i := range n {
		c.Observe(from.Add(time.Duration(i)*time.Second/time.Duration(n)), latency, failed)
	}
}

// step runs step s, at t0 + s seconds.
func step(c *Controller, s int) (float64, bool) {
	return c.Step(t0.Add(time.Duration(s) * time.Second))
}

func mustNew(t *testing.T, cfg Config) *Controller {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// base is the configuration the rule tests start from: 50 to 1000
// tokens/s, p99 under 50 ms, the defaults otherwise (Decrease 0.7,
// Increase 20, MinSamples 100, ErrorRate 0.05, Window 5 steps).
var base = Config{Floor: 50, Ceiling: 1000, LatencyTarget: 50 * time.Millisecond}

// More than 1 % of responses slower than the target is a p99 above it: the
// rate drops to 0.7 times what the upstream served in the step (300/s);
// exactly 1 % is not.
func TestDecreaseOnLatency(t *testing.T) {
	c := mustNew(t, base)
	feed(c, 1, 297, 5*time.Millisecond, false)
	feed(c, 1, 3, 80*time.Millisecond, false) // 1 %: the p99 is at 5 ms
	if r, changed := step(c, 1); r != 1000 || changed {
		t.Fatalf("step with 1 %% slow: rate %g, changed %v; want 1000 held at the ceiling", r, changed)
	}
	feed(c, 2, 296, 5*time.Millisecond, false)
	feed(c, 2, 4, 80*time.Millisecond, false) // 7 slow of 600 judged: 1.17 %
	r, changed := step(c, 2)
	if want := 0.7 * 300; r != want || !changed {
		t.Errorf("step with more than 1 %% slow: rate %g, changed %v; want %g (0.7 times 300 served)", r, changed, want)
	}
	st := c.Stats()
	if st.Decreases != 1 || st.Rate != r || st.Samples != 600 || st.Latency < 80*time.Millisecond || st.Latency > 92*time.Millisecond {
		t.Errorf("stats %+v; want 1 decrease over 600 samples, latency 80 ms to 15 %% above", st)
	}
}

// More than ErrorRate of the responses failed, however fast: decrease.
func TestDecreaseOnErrors(t *testing.T) {
	c := mustNew(t, base)
	feed(c, 1, 450, time.Millisecond, false)
	feed(c, 1, 50, time.Millisecond, true) // 10 % failed
	r, changed := step(c, 1)
	if want := 0.7 * 450; r != want || !changed {
		t.Errorf("rate %g, changed %v; want %g: 0.7 times the 450 successes a second", r, changed, want)
	}
	if st := c.Stats(); st.ErrorShare != 0.1 || st.Decreases != 1 {
		t.Errorf("stats %+v; want an error share of 0.1 and one decrease", st)
	}
	// 5 % is not more than the bound.
	c = mustNew(t, base)
	feed(c, 1, 475, time.Millisecond, false)
	feed(c, 1, 25, time.Millisecond, true)
	if r, _ := step(c, 1); r != 1000 {
		t.Errorf("5 %% failed: rate %g, want 1000", r)
	}
}

// With fewer observations than MinSamples in the window the rate holds,
// bad as they are; once the window holds enough, they are judged.
func TestHoldWithTooFewSamples(t *testing.T) {
	c := mustNew(t, Config{Floor: 50, Ceiling: 1000, Initial: 500, LatencyTarget: 50 * time.Millisecond, MinSamples: 100})
	for s := 1; s <= 3; s++ {
		feed(c, s, 30, time.Second, true)
		if r, changed := step(c, s); r != 500 || changed {
			t.Fatalf("step %d with %d samples: rate %g, changed %v; want 500 held", s, 30*s, r, changed)
		}
	}
	if st := c.Stats(); st.Holds != 3 || st.Samples != 0 {
		t.Errorf("stats %+v; want 3 holds and no samples judged", st)
	}
	feed(c, 4, 30, time.Second, true)
	if r, _ := step(c, 4); r != 50 {
		t.Errorf("step 4 with 120 samples, all failed: rate %g, want the floor 50", r)
	}
}

// A healthy upstream gets Increase more each step, up to the ceiling and
// no further.
func TestAdditiveIncrease(t *testing.T) {
	c := mustNew(t, Config{Floor: 50, Ceiling: 1000, Initial: 900, LatencyTarget: 50 * time.Millisecond, Increase: 30})
	want := []float64{930, 960, 990, 1000, 1000}
	for s, w := range want {
		feed(c, s+1, 200, 10*time.Millisecond, false)
		r, changed := step(c, s+1)
		if r != w || changed != (w != 1000 || s == 3) {
			t.Errorf("step %d: rate %g, changed %v; want %g", s+1, r, changed, w)
		}
	}
	if st := c.Stats(); st.Increases != 4 {
		t.Errorf("%d increases, want 4", st.Increases)
	}
	// The default Increase is Ceiling/50.
	c = mustNew(t, Config{Floor: 50, Ceiling: 1000, Initial: 100, LatencyTarget: 50 * time.Millisecond})
	feed(c, 1, 200, 10*time.Millisecond, false)
	if r, _ := step(c, 1); r != 120 {
		t.Errorf("default increase: rate %g after one healthy step from 100, want 120", r)
	}
}

// The floor holds against any failure, even an upstream that serves
// nothing; the ceiling against any health.
func TestFloorAndCeiling(t *testing.T) {
	c := mustNew(t, base)
	for s := 1; s <= 20; s++ {
		feed(c, s, 200, 30*time.Second, true)
		if r, _ := step(c, s); r < 50 {
			t.Fatalf("step %d: rate %g below the floor 50", s, r)
		}
	}
	if r := c.Rate(); r != 50 {
		t.Errorf("after 20 failing steps the rate is %g, want the floor 50", r)
	}
	for s := 21; s <= 200; s++ {
		feed(c, s, 200, time.Millisecond, false)
		if r, _ := step(c, s); r > 1000 {
			t.Fatalf("step %d: rate %g above the ceiling 1000", s, r)
		}
	}
	if r := c.Rate(); r != 1000 {
		t.Errorf("after 180 healthy steps the rate is %g, want the ceiling 1000", r)
	}
}

// One bad step decreases the rate once: the steps after it judge only
// what came after it, healthy, although their window of five steps would
// still reach back to it.
func TestNoRepeatedDecreaseFromOneBadWindow(t *testing.T) {
	c := mustNew(t, base)
	feed(c, 1, 300, 5*time.Millisecond, false)
	feed(c, 1, 100, 200*time.Millisecond, false)
	if r, _ := step(c, 1); r != 280 {
		t.Fatalf("bad step: rate %g, want 280 (0.7 times 400 served)", r)
	}
	for s := 2; s <= 5; s++ {
		feed(c, s, 280, 5*time.Millisecond, false)
		r, _ := step(c, s)
		if want := 280 + 20*float64(s-1); r != want {
			t.Errorf("step %d: rate %g, want %g", s, r, want)
		}
	}
	if st := c.Stats(); st.Decreases != 1 || st.Increases != 4 {
		t.Errorf("stats %+v; want 1 decrease, then 4 increases", st)
	}
}

// An observation made before the step that found the upstream unhealthy
// but reported after it belongs to that verdict: it is dropped.
func TestLateObservationDropped(t *testing.T) {
	c := mustNew(t, base)
	feed(c, 1, 200, time.Second, false)
	step(c, 1)
	before := c.Stats().Decreases
	// 200 slow observations dated before step 1, 200 fast ones after.
	feed(c, 1, 200, time.Second, false)
	feed(c, 2, 200, time.Millisecond, false)
	if r, _ := step(c, 2); r != 0.7*200+20 || c.Stats().Decreases != before {
		t.Errorf("rate %g after the late observations, stats %+v; want %g, an increase", r, c.Stats(), 0.7*200+20)
	}
}

// An unhealthy upstream that served more than the rate is draining its
// queue: the rate holds, and drops again only once the upstream serves no
// more than it.
func TestDrainHolds(t *testing.T) {
	c := mustNew(t, base)
	feed(c, 1, 200, time.Second, false) // overloaded, at 200/s
	if r, _ := step(c, 1); r != 140 {
		t.Fatalf("overload: rate %g, want 140", r)
	}
	feed(c, 2, 200, 600*time.Millisecond, false) // still 200/s from the queue
	if r, changed := step(c, 2); r != 140 || changed {
		t.Errorf("draining: rate %g, changed %v; want 140 held", r, changed)
	}
	if st := c.Stats(); st.Drains != 1 || st.Decreases != 1 || st.Served != 200 {
		t.Errorf("stats %+v; want 1 drain, 1 decrease, 200 served", st)
	}
	feed(c, 3, 140, 600*time.Millisecond, false) // slow at the rate: not a queue
	if r, _ := step(c, 3); r != 0.7*140 {
		t.Errorf("slow at the rate: rate %g, want %g", r, 0.7*140)
	}
}

// A step at or before the last one decides nothing and leaves the window
// as it is.
func TestStepOutOfOrder(t *testing.T) {
	c := mustNew(t, Config{Floor: 50, Ceiling: 1000, Initial: 500, LatencyTarget: 50 * time.Millisecond})
	feed(c, 1, 200, time.Millisecond, false)
	step(c, 1)
	for _, s := range []int{1, 0} {
		if r, changed := step(c, s); r != 520 || changed {
			t.Errorf("step at %d s after one at 1 s: rate %g, changed %v; want 520 unchanged", s, r, changed)
		}
	}
}

// A negative latency counts as 0, never slow.
func TestNegativeLatency(t *testing.T) {
	c := mustNew(t, base)
	feed(c, 1, 200, -time.Hour, false)
	if r, _ := step(c, 1); r != 1000 {
		t.Errorf("rate %g, want 1000", r)
	}
	if st := c.Stats(); st.Latency != histMin {
		t.Errorf("p99 of negative latencies reads %v, want the first bucket's bound %v", st.Latency, histMin)
	}
}

// Observe allocates nothing, for a fast, a slow and a failed response.
func TestObserveAllocs(t *testing.T) {
	c := mustNew(t, base)
	at := t0
	if n := testing.AllocsPerRun(1000, func() {
		c.Observe(at, 3*time.Millisecond, false)
		c.Observe(at, 3*time.Second, true)
		c.Observe(at, 2*time.Minute, false)
	}); n != 0 {
		t.Errorf("Observe: %v allocations, want 0", n)
	}
}

// A virtual clock from the zero time works as any other: a late
// observation is still dropped after an unhealthy step.
func TestZeroTimeClock(t *testing.T) {
	c := mustNew(t, base)
	var zero time.Time
	for i := range 200 {
		c.Observe(zero.Add(time.Duration(i)*time.Millisecond), time.Second, false)
	}
	if r, _ := c.Step(zero.Add(time.Second)); r != 140 {
		t.Fatalf("rate %g, want 140", r)
	}
	for i := range 200 {
		c.Observe(zero.Add(time.Duration(i)*time.Millisecond), time.Second, false) // late
		c.Observe(zero.Add(time.Second+time.Duration(i)*time.Millisecond), time.Millisecond, false)
	}
	if r, _ := c.Step(zero.Add(2 * time.Second)); r != 160 {
		t.Errorf("rate %g after late slow and fresh fast observations, want 160", r)
	}
}

// Responses to requests sent before a verdict, reported after it (a caller
// that dates observations when the request was sent, as httplimit does),
// are judged no more but still count as served: an upstream draining the
// queue they built is draining, and the rate holds.
func TestServedCountsRequestsJudgedBefore(t *testing.T) {
	c := mustNew(t, base)
	feed(c, 1, 200, time.Second, false) // overloaded, at 200/s
	if r, _ := step(c, 1); r != 140 {
		t.Fatalf("overload: rate %g, want 140", r)
	}
	// The queue drains at 200/s: its requests were sent before the
	// verdict; the few sent since are slow behind them.
	feed(c, 1, 200, 800*time.Millisecond, false)
	for i := range 120 {
		c.Observe(t0.Add(time.Second+time.Duration(i)*time.Millisecond), 600*time.Millisecond, false)
	}
	if r, changed := step(c, 2); r != 140 || changed {
		t.Errorf("draining the queue of requests sent before the verdict: rate %g, changed %v; want 140 held", r, changed)
	}
	if st := c.Stats(); st.Drains != 1 || st.Served != 320 {
		t.Errorf("stats %+v; want 1 drain, 320 served", st)
	}
}
