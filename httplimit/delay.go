package httplimit

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// ReasonDelayFull: the request would have waited (delay mode), but
// Options.MaxWaiting requests wait already; Retry-After is the wait it
// would have had.
const ReasonDelayFull = "delay_full"

// ReasonCancelled: the request's context ended while it waited (delay
// mode), usually because its client left; its reservations were given
// back (503).
const ReasonCancelled = "cancelled"

const (
	// defaultMaxDelay is Options.MaxDelay's default, and maxMaxDelay the
	// largest it may be.
	defaultMaxDelay = 30 * time.Second
	maxMaxDelay     = time.Hour
	// defaultMaxWaiting is Options.MaxWaiting's default.
	defaultMaxWaiting = 4096
)

// waiter is what a request that waits keeps of its decision once the
// decision's scratch is given back: the reservations that are not due yet,
// to give back if it stops waiting.
type waiter struct {
	rs []*engine.Reservation
}

// cancel gives back every reservation of w at now.
func (w *waiter) cancel(now time.Time) {
	for _, r := range w.rs {
		r.CancelAt(now)
	}
}

// validateDelays checks the rules' delay mode, which may wait at most
// maxDelay.
func validateDelays(rules []Rule, maxDelay time.Duration, p *problems) {
	for i := range rules {
		r := &rules[i]
		d := r.Delay
		if d == (Delay{}) {
			continue
		}
		bad := func(field, format string, args ...any) { p.add(r.Name, i, field, format, args...) }
		if d.MaxDelay < time.Millisecond || d.MaxDelay > maxDelay {
			bad("delay.max_delay", "must be from 1ms to %v (the longest a request may wait here), got %v", maxDelay, d.MaxDelay)
		}
		if d.Queue != 0 {
			_, exact := fixedpoint.QuantizeExact(d.Queue)
			if !isFinite(d.Queue) || d.Queue < minCost || d.Queue > 1e9 || !exact {
				bad("delay.queue", "must be 0 (MaxDelay times the rate) or from 0.001 to 1e9 tokens, a multiple of 0.001, got %v", d.Queue)
			}
		}
		if r.Mode == ModeShadow {
			bad("delay", "a shadow rule never holds a request back: delay needs mode enforce")
		}
		buckets := len(r.Limits) == 0 && r.MaxInFlight == 0
		for j := range r.Limits {
			lm := &r.Limits[j]
			buckets = buckets || !lm.isInFlight() && !lm.isQuota() && !lm.isWindow()
		}
		if !buckets {
			bad("delay", "a request waits for a token bucket's refill, and the rule has none")
		}
	}
}

// delayOn sets how long a request may wait for r's tokens, lim's, in delay
// mode; only an in-memory token bucket can reserve them.
func (r *rule) delayOn(lim engine.Limiter) error {
	if r.Delay.MaxDelay == 0 || r.period != "" || r.span != 0 {
		return nil
	}
	if _, ok := lim.(*engine.Engine); !ok {
		return fmt.Errorf("delay mode reserves tokens ahead, which only the in-memory store can; this store's limiter is a %T", lim)
	}
	r.wait = r.waitBound()
	return nil
}

// waitBound is how long a request may wait for the tokens of r, a token
// bucket of a rule in delay mode: the rule's MaxDelay, or less if its
// queue would be full first. 0 for a rule without delay mode.
func (r *rule) waitBound() time.Duration {
	d := r.Delay
	if d.MaxDelay == 0 {
		return 0
	}
	if d.Queue == 0 {
		return d.MaxDelay
	}
	// Tokens owed drain at the rate: a queue of q tokens is q/rate of
	// waiting.
	q := time.Duration(math.Floor(d.Queue / r.Rate * float64(time.Second)))
	return min(d.MaxDelay, q)
}

// reserve is enforce for a request that may wait: the token buckets of
// the enforce rules reserve the request's tokens, each due within its
// rule's wait bound (0 for a rule without delay mode), the other limits
// take at once; all of them or none. Validation and Bind made every such
// bucket an *engine.Engine. With wait, a request that must wait counts
// against Options.MaxWaiting; without, the caller waits (the check API).
func (l *Middleware) reserve(q *request, now time.Time, res *Result, applied []*rule, takes []engine.Take, out []engine.Decision, idx []int, wait bool) {
	rs := q.sc.reservations[:]
	if len(takes) > len(rs) {
		rs = make([]engine.Reservation, len(takes))
	}
	var othersBuf [maxTakes]int
	others := othersBuf[:0]
	denied, made := -1, 0
	var delay time.Duration
	for j, t := range takes {
		e, ok := t.Limiter.(*engine.Engine)
		if !ok {
			others = append(others, j)
			continue
		}
		bound := applied[idx[j]].wait
		out[j] = e.ReserveWithin(&rs[j], now, t.Key, t.N, bound)
		made = j + 1
		if !out[j].Allowed {
			if out[j].RetryAfter != engine.InfDuration {
				// A request made that much later waits no longer than the
				// bound.
				out[j].RetryAfter -= bound
			}
			denied = j
			break
		}
		delay = max(delay, rs[j].DelayFrom(now))
	}
	counted := false
	if denied < 0 && delay > 0 && wait {
		if n := l.waiting.Add(1); n > int64(l.opts.maxWaiting) {
			l.waiting.Add(-1)
			l.cancelReservations(rs[:made], takes[:made], now)
			l.delayFull(res, applied, out, idx, delay)
			return
		}
		counted = true
	}
	othersTaken := false
	if denied < 0 && len(others) > 0 {
		denied, othersTaken = l.takeOthers(q, now, takes, out, others), true
	}
	if denied >= 0 {
		if counted {
			l.waiting.Add(-1)
		}
		l.cancelReservations(rs[:made], takes[:made], now)
		for j, i := range idx {
			_, bucket := takes[j].Limiter.(*engine.Engine)
			if j != denied && (bucket && j >= made || !bucket && !othersTaken) {
				res.Policies[i].Unknown = true
			}
		}
	}
	for j, i := range idx {
		if res.Policies[i].Unknown {
			continue
		}
		res.Policies[i].set(out[j], res.Policies[i].Rate)
	}
	if denied < 0 {
		for _, i := range idx {
			applied[i].counters.allow(&res.Policies[i])
			if delay > 0 && applied[i].wait > 0 {
				applied[i].counters.delayed.Add(1)
			}
		}
		res.Delay = delay
		if delay > 0 && wait {
			w := &waiter{}
			for j := range rs[:made] {
				if _, ok := takes[j].Limiter.(*engine.Engine); ok && rs[j].DelayFrom(now) > 0 {
					w.rs = append(w.rs, rs[j].Clone())
				}
			}
			q.sc.waiter = w
		}
		return
	}
	l.deny(q, now, res, applied, out, idx, denied)
}

// takeOthers takes the limits of takes at others (quotas, windows) at
// once, all or none, and returns the index in takes of the one that
// denied, or -1.
func (l *Middleware) takeOthers(q *request, now time.Time, takes []engine.Take, out []engine.Decision, others []int) int {
	var tBuf [maxTakes]engine.Take
	var oBuf [maxTakes]engine.Decision
	ot, oo := tBuf[:0], oBuf[:len(others)]
	for _, j := range others {
		ot = append(ot, takes[j])
	}
	d, err := takeAll(q.r.Context(), now, ot, oo)
	if err != nil {
		// In memory nothing fails; if it did, the request takes nothing.
		d = 0
		oo[0] = engine.Decision{RetryAfter: time.Second}
	}
	for k, j := range others {
		out[j] = oo[k]
	}
	if d < 0 {
		return -1
	}
	return others[d]
}

// cancelReservations gives back the reservations of the token buckets
// among takes.
func (l *Middleware) cancelReservations(rs []engine.Reservation, takes []engine.Take, now time.Time) {
	for j := range rs {
		if _, ok := takes[j].Limiter.(*engine.Engine); ok {
			rs[j].CancelAt(now)
		}
	}
}

// delayFull denies a request that would have waited when MaxWaiting
// requests wait already.
func (l *Middleware) delayFull(res *Result, applied []*rule, out []engine.Decision, idx []int, delay time.Duration) {
	l.waitFull.Add(1)
	for _, i := range idx {
		res.Policies[i].Unknown = true
	}
	res.Allowed, res.Status, res.Reason = false, http.StatusTooManyRequests, ReasonDelayFull
	for _, i := range idx {
		if applied[i].wait > 0 {
			res.DeniedBy = applied[i].Name
			break
		}
	}
	res.RetryAfter = max(1, ceilSeconds(delay))
}

// sleep waits d, or until ctx ends; it returns ctx.Err() if ctx ended
// first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// await waits out res.Delay for a request that holds waiter w, counted in
// Waiting until it ends. If ctx ends first, it gives the reservations
// back and reports false.
func (l *Middleware) await(ctx context.Context, w *waiter, delay time.Duration) bool {
	defer l.waiting.Add(-1)
	if err := l.opts.sleep(ctx, delay); err != nil {
		if w != nil {
			w.cancel(l.opts.now())
		}
		l.waitCancelled.Add(1)
		return false
	}
	return true
}

// DelayStats are the counts of delay mode across the rules.
type DelayStats struct {
	// Waiting is how many requests wait now.
	Waiting int64
	// Full counts requests denied because Options.MaxWaiting waited
	// already (ReasonDelayFull); Cancelled those whose context ended while
	// they waited (ReasonCancelled).
	Full, Cancelled uint64
}

// DelayStats returns the counts of delay mode.
func (l *Middleware) DelayStats() DelayStats {
	return DelayStats{Waiting: l.waiting.Load(), Full: l.waitFull.Load(), Cancelled: l.waitCancelled.Load()}
}
