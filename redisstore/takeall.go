package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
)

// TakeAll takes every take's tokens, or none, and fills out as
// engine.Engine.TakeAllAt does: when all are taken out[i] is what Take would
// have returned, and denied is -1; when take k is denied nothing is
// consumed, no out[i].Allowed is true, out[i] reports bucket i with the wait
// until take i alone would pass, and denied is k. A take that can never pass
// (N above its Burst, negative, NaN) is reported before anything is taken.
//
// Every takes[i].Limiter must be a non-nil *Limiter, *Quota or *Window on
// the same client as l (the client value given to New or NewGoRedis); a
// Quota's take may bring its own calendar (engine.Take.Calendar).
// Otherwise the error wraps engine.ErrNilLimiter or engine.ErrForeignTake,
// and nothing is taken. An
// out shorter than takes is engine.ErrShortOut; a nil l is
// engine.ErrNilLimiter.
//
// When every key maps to one Redis Cluster hash slot (with a standalone
// server too: the rule does not depend on the deployment) the call is one
// script, atomic: no other caller sees a partial state. Otherwise the takes
// are made one script each, in order, and a denial gives back the earlier
// ones in reverse order, each less the refill its bucket received since the
// take, as engine.Engine.TakeAllAt does: while the call runs another caller
// may be denied for tokens about to be given back, but no bucket ever admits
// more than it would have had the call never been made. If the store fails
// after some takes were made, the give-backs are attempted; a give-back that
// fails leaves its tokens spent (under-admission of at most that take's N).
//
// A store failure is an error, classified as Take's are: it wraps
// engine.ErrUnavailable when nothing was taken for certain (every take
// given back, and the failed script not run or unable to take), else
// engine.ErrOutcomeUnknown. out and denied are then the answer of the
// policies: any FailClosed take denies the call, Fallback takes are decided
// together by their local engines (all or none), FailOpen takes are allowed.
// When every take's policy is Fallback the local engines decided the whole
// call: the error also wraps engine.ErrFallback, and out stands.
func (l *Limiter) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (denied int, err error) {
	denied, _, err = l.takeAll(ctx, takes, out)
	return denied, err
}

// limiterOf is the Limiter of a take that checkTakes accepted.
func limiterOf(tk *engine.Take) *Limiter {
	tl, _ := tk.Limiter.(*Limiter)
	return tl
}

// checkTakes refuses the calls of TakeAll that are programming errors.
func (l *Limiter) checkTakes(takes []engine.Take, out []engine.Decision) error {
	return remote.CheckTakes("redisstore", l, takes, out, func(tl *Limiter) string {
		if tl.conn != l.conn {
			return "another client"
		}
		return ""
	})
}

// takeAll is TakeAll that also returns the server's time of the (last)
// script, for tests that replay decisions through an engine.
func (l *Limiter) takeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (denied int, now time.Time, err error) {
	takes = unwrapShapes(takes)
	if err := l.checkTakes(takes, out); err != nil {
		return -1, now, err
	}
	if len(takes) == 0 {
		return -1, now, nil
	}
	if tl := limiterOf(&takes[0]); len(takes) == 1 && tl.quota == nil && tl.window == nil {
		d, now, err := limiterOf(&takes[0]).takeOne(ctx, takes[0].Key, takes[0].N)
		out[0] = d
		if d.Allowed {
			return -1, now, err
		}
		return 0, now, err
	}
	var stack [8]call
	calls := stack[:0]
	never := -1
	slot, sameSlot := -1, true
	var instant time.Time // the instance's clock, read once for the quotas
	for i := range takes {
		tl := limiterOf(&takes[i])
		c := call{l: tl, key: tl.KeyFor(takes[i].Key), n: takes[i].N, u: tl.s.u}
		if tl.quota != nil {
			if instant.IsZero() {
				instant = tl.quota.Now()
			}
			prepareQuota(tl.quota, &c, instant, takes[i].Calendar)
		}
		if tl.window != nil {
			c.u = units{capacity: tl.window.Capacity()}
		}
		c.cost = c.u.scriptCost(c.n)
		if c.cost == c.u.never() && never < 0 {
			never = i
		}
		calls = append(calls, c)
		if s := slotOf(c.key); slot < 0 {
			slot = s
		} else if s != slot {
			sameSlot = false
		}
	}
	if sameSlot || never >= 0 {
		if never >= 0 {
			// Reported before anything is taken: every other take peeks.
			for i := range calls {
				if i != never && calls[i].cost <= calls[i].u.capacity {
					calls[i].cost += calls[i].u.capacity + 1
				}
			}
			if !sameSlot {
				return l.peekEach(ctx, takes, calls, out, never, true)
			}
		}
		denied, now, err = l.script(ctx, calls, out)
		if err != nil {
			denied, err = l.fail(takes, out, err, remote.IsUnsent(err) || !anyTakes(calls))
			return denied, now, err
		}
		if never >= 0 {
			denied = never
		}
		count(calls, out, denied)
		return denied, now, nil
	}
	return l.sequence(ctx, takes, calls, out)
}

// anyTakes reports whether any of calls can take tokens.
func anyTakes(calls []call) bool {
	for _, c := range calls {
		if c.u.takes(c.cost) {
			return true
		}
	}
	return false
}

// call is one take in the script's terms.
type call struct {
	l   *Limiter
	key string
	n   float64
	// u is the limit's units: l's, or for a calendar quota (u.p == 0)
	// the quota's capacity, with b1 and b2, the ends of the period that
	// holds the instance's clock and of the next (Unix milliseconds), or
	// for a strict window (l.window) its capacity.
	u      units
	b1, b2 int64
	// cost is in quanta; capacity+1+c asks the script for a report for a
	// cost of c without taking (see takeScript), and units.never marks a
	// take that can never pass.
	cost uint64
	at   int64 // the tick the take stored (a quota: its period's end; a window: its slot), for a give-back
}

// args appends c's five arguments of takeScript (and refundScript's first
// five) to args.
func (c *call) args(args []string) []string {
	if w := c.l.window; w != nil {
		return append(args, strconv.FormatUint(c.u.capacity, 10), "-1", strconv.FormatInt(w.SlotNanos(), 10),
			strconv.Itoa(w.Slots()), strconv.FormatUint(c.cost, 10))
	}
	if c.u.p == 0 {
		return append(args, strconv.FormatUint(c.u.capacity, 10), "0", strconv.FormatInt(c.b1, 10),
			strconv.FormatInt(c.b2, 10), strconv.FormatUint(c.cost, 10))
	}
	s := c.l.s
	return append(args, s.capArg, s.pArg, s.qArg, s.fillArg, strconv.FormatUint(c.cost, 10))
}

// script runs takeScript over calls and fills out. It returns the index of
// the denied take (-1 for none) and the server's time.
func (l *Limiter) script(ctx context.Context, calls []call, out []engine.Decision) (int, time.Time, error) {
	keys := make([]string, len(calls))
	args := make([]string, 0, 5*len(calls))
	for i := range calls {
		keys[i] = calls[i].key
		args = calls[i].args(args)
	}
	v, err := l.call(ctx, takeLua, keys, args)
	if err != nil {
		return -1, time.Time{}, err
	}
	if len(v) >= 2 && v[1] < 0 && -v[1] <= int64(len(calls)) {
		c := &calls[-v[1]-1]
		return -1, time.Time{}, remote.Unsent{Err: fmt.Errorf("%w: %s at %v, a period's end from the instance's %v",
			ErrClockAhead, c.key, time.UnixMicro(v[0]).UTC(), time.UnixMilli(c.b2).UTC())}
	}
	want := 2 + 2*len(calls)
	for i := range calls {
		if w := calls[i].l.window; w != nil {
			want += w.Slots() + 1
		}
	}
	if len(v) != want {
		return -1, time.Time{}, fmt.Errorf("%w: %d integers for %d takes", errReply, len(v), len(calls))
	}
	now := v[0]
	denied := int(v[1]) - 1
	ext := v[2+2*len(calls):]
	for i := range calls {
		var d engine.Decision
		var err error
		if w := calls[i].l.window; w != nil {
			counts := ext[:w.Slots()+1]
			ext = ext[w.Slots()+1:]
			d, err = windowDecision(w, calls[i].u, calls[i].cost, denied >= 0, v[2+2*i], counts, now)
		} else if calls[i].u.p == 0 {
			d, err = quotaDecision(calls[i].u, calls[i].cost, denied >= 0, v[2+2*i], v[3+2*i], now)
		} else {
			d, err = decision(calls[i].u, calls[i].cost, denied >= 0, v[2+2*i], v[3+2*i], now)
		}
		if err != nil {
			return -1, time.Time{}, fmt.Errorf("take %d: %w", i, err)
		}
		out[i] = d
		calls[i].at = v[2+2*i]
	}
	return denied, time.UnixMicro(now), nil
}

// decision is the Decision for a take of cost (script units) from a bucket
// that holds tk quanta at tick at, after the take if it was made, at the
// server's time now. denied reports that the take, or another of an
// all-or-nothing call, was not made.
func decision(u units, cost uint64, denied bool, at, tk, now int64) (engine.Decision, error) {
	if at < now || tk < 0 || uint64(tk) > u.capacity {
		return engine.Decision{}, fmt.Errorf("%w: a bucket at %d holding %d at %d", errReply, at, tk, now)
	}
	d := engine.Decision{
		Allowed:    !denied,
		Remaining:  float64(tk) / 1000,
		ResetAfter: u.wait(at, uint64(tk), u.capacity, now),
	}
	if denied {
		d.RetryAfter = u.wait(at, uint64(tk), u.reportCost(cost), now)
	}
	if cost == u.never() {
		d.RetryAfter = engine.InfDuration
	}
	return d, nil
}

// sequence makes takes on different slots one script each, giving back the
// earlier ones when one is denied.
func (l *Limiter) sequence(ctx context.Context, takes []engine.Take, calls []call, out []engine.Decision) (int, time.Time, error) {
	var now time.Time
	for i := range calls {
		k, t, err := l.script(ctx, calls[i:i+1], out[i:i+1])
		now = t
		if err == nil && k < 0 {
			continue
		}
		gaveBack := l.giveBack(ctx, calls[:i])
		if err != nil {
			denied, err := l.fail(takes, out, err, gaveBack && (remote.IsUnsent(err) || !anyTakes(calls[i:i+1])))
			return denied, now, err
		}
		// Report every other take as denied, its bucket as it is now.
		for j := range calls {
			if j != i {
				calls[j].cost += calls[j].u.capacity + 1
			}
		}
		return l.peekEach(ctx, takes, calls, out, i, gaveBack)
	}
	count(calls, out, -1)
	return -1, now, nil
}

// peekEach fills out for calls whose costs all make the script report
// without taking, one key at a time, and counts a denial at k. gaveBack
// reports that the call holds no tokens: a failure then took nothing.
func (l *Limiter) peekEach(ctx context.Context, takes []engine.Take, calls []call, out []engine.Decision, k int, gaveBack bool) (int, time.Time, error) {
	var now time.Time
	for j := range calls {
		if j == k && calls[j].cost <= calls[j].u.capacity {
			continue // the denial itself is already reported
		}
		_, t, err := l.script(ctx, calls[j:j+1], out[j:j+1])
		if err != nil {
			denied, err := l.fail(takes, out, err, gaveBack)
			return denied, t, err
		}
		now = t
	}
	count(calls, out, k)
	return k, now, nil
}

// giveBack refunds calls in reverse order, and reports whether every
// refund was made.
func (l *Limiter) giveBack(ctx context.Context, calls []call) bool {
	all := true
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		if c.cost == 0 {
			continue
		}
		args := append(c.args(make([]string, 0, 6)), strconv.FormatInt(c.at, 10))
		// A failed give-back leaves the tokens spent: never more admission.
		if _, err := l.call(ctx, refundLua, []string{c.key}, args); err != nil {
			all = false
		}
	}
	return all
}

// count counts each take once in its Limiter's Stats.
func count(calls []call, out []engine.Decision, denied int) {
	for i := range calls {
		if denied < 0 {
			calls[i].l.core.Counters.Allowed.Add(1)
		} else {
			calls[i].l.core.Counters.Denied.Add(1)
			out[i].Allowed = false
		}
	}
}

// fail answers a call the store could not decide by the policies (failed)
// and returns the denied index and the error to return: err classified by
// storeError, nothingTaken telling whether the call certainly holds no
// tokens.
func (l *Limiter) fail(takes []engine.Take, out []engine.Decision, err error, nothingTaken bool) (int, error) {
	if errors.Is(err, ErrClockAhead) {
		// The server answered, from a clock no fallback may stand in for.
		return remote.FailClosed(takes, out, coreOf), storeError(err, nothingTaken, false)
	}
	denied, fellBack := remote.Fail(takes, out, coreOf)
	return denied, storeError(err, nothingTaken, fellBack)
}

// coreOf is the core of a take's Limiter.
func coreOf(tk *engine.Take) *remote.Core { return limiterOf(tk).core }
