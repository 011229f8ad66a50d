package adaptive

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Controller sets a rate from the health of an upstream: Observe records
// each response, Step judges the recent ones and moves the rate. See the
// package documentation for the rules.
//
// All methods are safe for simultaneous use. Observe and Rate take no lock
// and allocate nothing; Step takes a mutex, which only Step and Stats hold.
type Controller struct {
	cfg settings

	// cur is the index in slots of the slot Observe adds to.
	cur atomic.Int64
	// judged is the time of the last step that found the upstream
	// unhealthy, nil before any: an observation made before it was part of
	// that verdict, or late to it, and is not counted again. A pointer, not
	// Unix nanoseconds, so that any clock works, a virtual one from
	// time.Time{} too.
	judged atomic.Pointer[time.Time]
	// rate holds the rate's float64 bits.
	rate atomic.Uint64

	// slots is a ring of one slot per step, steps+1 of them: the one being
	// filled, and the last steps closed. The slice is fixed at New; Observe
	// adds to slots[cur] with atomics, Step reads and clears them.
	slots []slot

	mu sync.Mutex // Step's; guards what follows
	// fresh is the number of closed slots, newest first, that the next
	// step may judge: those closed since the upstream was last found
	// unhealthy, at most steps.
	fresh    int
	last     time.Time // the last step's time
	counts   []uint64  // scratch for the merged histogram
	stats    Stats
	stepping bool // a Step has run: last is set, be it the zero time of a virtual clock
}

// Stats is what a Controller has done, and what it saw at its last step.
type Stats struct {
	// Rate is the current rate, in tokens per second.
	Rate float64
	// Latency is the percentile latency the last judging step read (within
	// the histogram's 15 %), and ErrorShare the share of failures it saw,
	// over Samples observations; all 0 if it had too few to judge.
	Latency    time.Duration
	ErrorShare float64
	Samples    uint64
	// Served is the rate of successful responses in the last step's slot,
	// per second.
	Served float64
	// Increases, Decreases and Drains count the steps that raised the rate,
	// lowered it, and held it although the upstream was unhealthy because
	// its queue was draining (it served more than the rate). Holds counts
	// the steps with too few observations to judge.
	Increases, Decreases, Drains, Holds uint64
}

// New returns a Controller for cfg, at cfg.Initial (Ceiling by default).
// A field out of range is an error wrapping ErrInvalidConfig that names it
// and its range.
func New(cfg Config) (*Controller, error) {
	s, err := cfg.check()
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: s, slots: make([]slot, s.steps+1), counts: make([]uint64, histBuckets)}
	for i := range c.slots {
		c.slots[i].hist = make([]atomic.Uint64, histBuckets)
	}
	c.setRate(s.Initial)
	return c, nil
}

// Observe records one response of the upstream, completed at at after
// latency; failed says whether the upstream failed it (a 5xx it sent, or a
// timeout), not the client (see the package documentation: 4xx and
// disconnects must not be observed as failures, and a disconnect not at
// all). A negative latency counts as 0. An observation made before the
// last step that found the upstream unhealthy is not judged again, as
// that step judged its time; what the upstream served counts it still.
//
// Observe is lock-free and allocates nothing: a binary search over the
// histogram's bounds and up to four atomic adds.
func (c *Controller) Observe(at time.Time, latency time.Duration, failed bool) {
	s := &c.slots[c.cur.Load()]
	// What the upstream served counts whenever it was asked: an upstream
	// that drains a queue built before a verdict serves those requests.
	if !failed {
		s.served.Add(1)
	}
	if j := c.judged.Load(); j != nil && at.Before(*j) {
		return
	}
	latency = max(latency, 0)
	s.hist[bucketOf(int64(latency))].Add(1)
	if failed {
		s.failed.Add(1)
	}
	if latency > c.cfg.LatencyTarget {
		s.slow.Add(1)
	}
}

// Rate is the current rate, in tokens per second.
func (c *Controller) Rate() float64 { return math.Float64frombits(c.rate.Load()) }

func (c *Controller) setRate(r float64) { c.rate.Store(math.Float64bits(r)) }

// Stats returns what the controller has done and last saw.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.Rate = c.Rate()
	return st
}

// Step closes the observations since the last step and judges them with
// those of the steps before, up to Window, and returns the rate and
// whether it changed; the caller applies it (engine.SetLimitAt). It is
// meant to run every Interval; a step at or before the last one's time
// decides nothing.
//
// The upstream is unhealthy if, over the judged observations, more than
// 1-Percentile of them took longer than LatencyTarget (the percentile is
// above it, counted exactly, not read from the histogram) or more than
// ErrorRate of them failed. Then:
//   - if the upstream served more successes in the last step than the
//     rate, by drainMargin, its queue is draining: the rate holds;
//   - else the rate drops to Decrease times what the upstream served in
//     the last step, or times the rate if that is lower, but not below
//     Floor.
//
// Either way the observations judged are spent: the next step judges only
// observations made after this one. Without that, the same bad window
// would decrease the rate again at every step until it has passed, and the
// rate would collapse to the floor for one overload.
//
// A healthy upstream gets Increase more, up to Ceiling. With fewer than
// MinSamples observations the rate holds: there is no evidence either way.
func (c *Controller) Step(at time.Time) (rate float64, changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.Rate()
	dur := c.cfg.Interval
	if c.stepping {
		if !at.After(c.last) {
			return old, false
		}
		dur = at.Sub(c.last)
	}
	c.stepping, c.last = true, at

	// Close the slot being filled and open the oldest one, emptied.
	closed := int(c.cur.Load())
	next := (closed + 1) % len(c.slots)
	c.slots[closed].dur = dur
	c.slots[next].clear()
	c.cur.Store(int64(next))
	c.fresh = min(c.fresh+1, c.cfg.steps)

	clear(c.counts)
	var n, failed, slow uint64
	for k := range c.fresh {
		s := &c.slots[(closed-k+len(c.slots))%len(c.slots)]
		for i := range s.hist {
			v := s.hist[i].Load()
			c.counts[i] += v
			n += v
		}
		failed += s.failed.Load()
		slow += s.slow.Load()
	}
	newest := &c.slots[closed]
	served := float64(newest.served.Load()) / dur.Seconds()
	c.stats.Served = served

	if n < uint64(c.cfg.MinSamples) {
		c.stats.Holds++
		c.stats.Latency, c.stats.ErrorShare, c.stats.Samples = 0, 0, 0
		return old, false
	}
	slow = min(slow, n)
	failed = min(failed, n)
	c.stats.Latency = percentileOf(c.counts, n, c.cfg.Percentile)
	c.stats.ErrorShare = float64(failed) / float64(n)
	c.stats.Samples = n
	// The percentile is above the target exactly when fewer observations
	// than its rank are at or below it.
	slowP := n-slow < rank(c.cfg.Percentile, n)
	unhealthy := slowP || c.stats.ErrorShare > c.cfg.ErrorRate

	r := old
	switch {
	case unhealthy && served > old*(1+drainMargin):
		c.stats.Drains++
	case unhealthy:
		r = max(c.cfg.Floor, c.cfg.Decrease*min(old, served))
		if r < old {
			c.stats.Decreases++
		}
	default:
		r = min(c.cfg.Ceiling, old+c.cfg.Increase)
		if r > old {
			c.stats.Increases++
		}
	}
	if unhealthy {
		c.fresh = 0
		c.judged.Store(&at)
	}
	c.setRate(r)
	return r, r != old
}

// drainMargin is how far above the rate the upstream must have served, in
// the last step, for an unhealthy step to read it as draining its queue
// rather than overloaded: enough that the noise of a step's count of
// responses at a steady rate does not hold the rate at an overload.
const drainMargin = 0.05
