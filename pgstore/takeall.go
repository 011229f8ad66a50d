package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
)

// TakeAll takes every take's tokens, or none, in one statement: atomic, as
// engine.Engine.TakeAllAt is in memory. When all are taken out[i] is what
// Take would have returned and denied is -1; when take k is denied nothing
// is taken, no out[i].Allowed is true, out[i] reports bucket i as it is
// with the wait until take i alone would pass, and denied is k. A take that
// can never pass (N above its Burst, negative, NaN) is reported before
// anything is taken. Concurrent TakeAlls lock their rows in one order, so
// they do not deadlock each other. A TakeAll of one take is a Take of the
// take's Limiter (its Timeout, breaker and Stats), coalesced as Take is.
//
// Every takes[i].Limiter must be a non-nil *Limiter, *Quota or *Window on
// the same DB value and Table as l (a Quota's take may bring its own
// calendar, engine.Take.Calendar): otherwise the error wraps
// engine.ErrNilLimiter or engine.ErrForeignTake, and nothing is taken. An out shorter than takes is
// engine.ErrShortOut.
//
// A store failure is an error classified as Take's; out and denied are then
// the policies' answer: any FailClosed take denies the call, Fallback takes
// are decided together by their local engines (all or none), FailOpen takes
// are allowed. When every take's policy is Fallback the error also wraps
// engine.ErrFallback, and out stands.
func (l *Limiter) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	denied, _, err := l.takeAll(ctx, takes, out, nil)
	return denied, err
}

func limiterOf(tk *engine.Take) *Limiter {
	tl, _ := tk.Limiter.(*Limiter)
	return tl
}

func (l *Limiter) checkTakes(takes []engine.Take, out []engine.Decision) error {
	return remote.CheckTakes("pgstore", l, takes, out, func(tl *Limiter) string {
		switch {
		case tl.conn != l.conn:
			return "another DB"
		case tl.s.Table != l.s.Table:
			// One statement reads one table.
			return fmt.Sprintf("table %s, not %s", tl.s.Table, l.s.Table)
		}
		return ""
	})
}

// takeAll is TakeAll that also returns the database's time of the decision;
// at, when not nil, is the time the functions use instead of the database
// clock (tests).
func (l *Limiter) takeAll(ctx context.Context, takes []engine.Take, out []engine.Decision, at *int64) (denied int, now time.Time, err error) {
	takes = unwrapShapes(takes)
	if err := l.checkTakes(takes, out); err != nil {
		return -1, now, err
	}
	n := len(takes)
	if n == 0 {
		return -1, now, nil
	}
	if tl := limiterOf(&takes[0]); n == 1 && tl.quota == nil && tl.window == nil {
		// The take's own Limiter, whose bucket it is: l may be another of
		// the same DB. A single take coalesces
		// with the key's others (coalesce.go).
		var d engine.Decision
		d, denied, now, err = limiterOf(&takes[0]).takeOne(ctx, takes[0].Key, takes[0].N, at)
		out[0] = d
		return denied, now, err
	}
	keys := make([][]byte, n)
	costs := make([]int64, n)
	never := -1
	takes0 := false
	caps := make([]int64, n)
	ps := make([]string, n)
	qq := make([]string, n)
	// us are the units of each take: its Limiter's, or a quota's capacity.
	us := make([]units, n)
	var instant time.Time // the instance's clock, read once for the quotas
	extra := 0            // the counts of the windows' takes after the ticks
	for i := range takes {
		tl := limiterOf(&takes[i])
		keys[i] = []byte(tl.KeyFor(takes[i].Key))
		u := tl.s.u
		caps[i], ps[i], qq[i] = int64(u.capacity), u.pArg, u.qArg
		if tl.quota != nil {
			if instant.IsZero() {
				instant = tl.quota.Now()
			}
			// A quota's take: a negative cap, b1 and b2 in microseconds.
			capacity, b1, b2 := tl.quota.Bounds(instant, takes[i].Calendar)
			u = units{capacity: capacity}
			caps[i] = -int64(capacity)
			ps[i], qq[i] = strconv.FormatInt(b1.UnixMicro(), 10), strconv.FormatInt(b2.UnixMicro(), 10)
		}
		if w := tl.window; w != nil {
			// A window's take: a negative p, the slot's length in
			// nanoseconds, and q its slots.
			u = units{capacity: w.Capacity()}
			caps[i] = int64(u.capacity)
			ps[i], qq[i] = strconv.FormatInt(-w.SlotNanos(), 10), strconv.Itoa(w.Slots())
			extra += w.Slots() + 1
		}
		us[i] = u
		c := u.cost(takes[i].N)
		if c == u.never() && never < 0 {
			never = i
		}
		if c != 0 && c != u.never() {
			takes0 = true
		}
		costs[i] = int64(c)
	}
	if never >= 0 {
		// Reported before anything is taken: the others only look.
		for i := range costs {
			if i != never {
				costs[i] = 0
			}
		}
		takes0 = false
	}
	var nowUS int64
	var ats, qs []int64
	var k int32
	err = l.query(ctx, l.s.takeAll, []any{keys, caps, ps, qq, costs, l.s.lockMS, at}, &nowUS, &k, &ats, &qs)
	denied = int(k) - 1
	if err == nil && k < 0 && int(-k) <= n {
		i := int(-k) - 1
		err = remote.Unsent{Err: fmt.Errorf("%w: take %d at %v, a period's end from the instance's %v",
			ErrClockAhead, i, time.UnixMicro(nowUS).UTC(), qq[i])}
	}
	if err == nil && (len(ats) != n+extra || len(qs) != n) {
		err = fmt.Errorf("%w: %d states for %d takes", errReply, len(ats), n)
	}
	if err != nil {
		denied, err = l.fail(takes, out, err, !takes0)
		return denied, now, err
	}
	counts := ats[n:]
	for i := range takes {
		var d engine.Decision
		var err error
		if w := limiterOf(&takes[i]).window; w != nil {
			c := us[i].cost(takes[i].N)
			d, err = w.WindowDecision(us[i].capacity, c, c == us[i].never(), denied < 0, ats[i], counts[:w.Slots()+1], nowUS)
			counts = counts[w.Slots()+1:]
		} else if c := us[i].cost(takes[i].N); caps[i] < 0 {
			d, err = remote.QuotaDecision(us[i].capacity, c, c == us[i].never(), denied >= 0, false, ats[i], qs[i], nowUS)
		} else {
			d, err = decision(us[i], c, denied >= 0, ats[i], qs[i], nowUS)
		}
		if err != nil {
			denied, err = l.fail(takes, out, fmt.Errorf("take %d: %w", i, err), !takes0 || denied >= 0)
			return denied, now, err
		}
		out[i] = d
	}
	if never >= 0 {
		denied = never
	}
	if denied >= 0 && never < 0 && caps[denied] >= 0 && limiterOf(&takes[denied]).window == nil {
		out[denied].RetryAfter = waitForRepeats(takes, out, ats, qs, nowUS, denied)
	}
	// Every take counts once, as in the engine: allowed if the call was.
	for i := range takes {
		if denied >= 0 {
			limiterOf(&takes[i]).core.Counters.Denied.Add(1)
		} else {
			limiterOf(&takes[i]).core.Counters.Allowed.Add(1)
		}
	}
	return denied, time.UnixMicro(nowUS), nil
}

// waitForRepeats is the RetryAfter of the denied take k of a call: the wait
// until take k passes in its bucket, reported as it is, once the call's
// earlier takes from the same bucket are made (they passed: k is the first
// denial), as the engine reports it; positive when only those earlier takes
// stood in the way.
func waitForRepeats(takes []engine.Take, out []engine.Decision, ats, qs []int64, now int64, k int) time.Duration {
	u := limiterOf(&takes[k]).s.u
	var earlier uint64
	for j := range k {
		if takes[j].Limiter == takes[k].Limiter && takes[j].Key == takes[k].Key {
			earlier += u.cost(takes[j].N)
		}
	}
	if earlier == 0 || earlier > uint64(qs[k]) {
		return out[k].RetryAfter
	}
	return u.wait(ats[k], uint64(qs[k])-earlier, u.cost(takes[k].N), now)
}

// errReply is wrapped by the error for a reply the Limiter cannot read.
var errReply = errors.New("pgstore: unexpected reply")

// decision is the Decision for a take of cost from a bucket that holds tk
// quanta at microsecond at (after the take, if it was made), at the
// database's time now.
func decision(u units, cost uint64, denied bool, at, tk, now int64) (engine.Decision, error) {
	if at < now || tk < 0 || uint64(tk) > u.capacity {
		return engine.Decision{}, fmt.Errorf("%w: a bucket at %d holding %d at %d", errReply, at, tk, now)
	}
	d := engine.Decision{
		Allowed:    !denied,
		Remaining:  float64(tk) / 1000,
		ResetAfter: u.wait(at, uint64(tk), u.capacity, now),
	}
	switch {
	case cost == u.never():
		d.Allowed = false
		d.RetryAfter = engine.InfDuration
	case denied:
		d.RetryAfter = u.wait(at, uint64(tk), cost, now)
	}
	return d, nil
}

// fail fills out with the policies' answer for a call the store could not
// decide, counts it (remote.Fail), and returns the denied index and the
// classified error.
func (l *Limiter) fail(takes []engine.Take, out []engine.Decision, err error, nothingTaken bool) (int, error) {
	if errors.Is(err, ErrClockAhead) {
		// The database answered, from a clock no fallback may stand in
		// for.
		return remote.FailClosed(takes, out, coreOf), storeError(err, nothingTaken, false)
	}
	denied, fellBack := remote.Fail(takes, out, coreOf)
	return denied, storeError(err, nothingTaken, fellBack)
}

// coreOf is the core of a take's Limiter.
func coreOf(tk *engine.Take) *remote.Core { return limiterOf(tk).core }
