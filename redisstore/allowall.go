package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Take is one part of an AllowAll: N tokens from Key's bucket of Limiter (nil
// means the Limiter AllowAll is called on).
type Take struct {
	Limiter *Limiter
	Key     string
	N       float64
}

// ErrShortOut is returned by AllowAll when out has fewer decisions than
// takes.
var ErrShortOut = errors.New("redisstore: out is shorter than takes")

// AllowAll takes every take's tokens, or none, and fills out as
// engine.AllowAllAt does: when all are taken out[i] is what AllowN would have
// returned, and denied is -1; when take k is denied nothing is consumed,
// no out[i].Allowed is true, out[i] reports bucket i with the wait until take
// i alone would pass, and denied is k. A take that can never pass (N above
// its Burst, negative, NaN) is reported before anything is taken.
//
// When every key maps to one Redis Cluster hash slot (with a standalone
// server too: the rule does not depend on the deployment) the call is one
// script, atomic: no other caller sees a partial state. Otherwise the takes
// are made one script each, in order, and a denial gives back the earlier
// ones in reverse order, each less the refill its bucket received since the
// take, as engine.AllowAll does: while the call runs another caller may be
// denied for tokens about to be given back, but no bucket ever admits more
// than it would have had the call never been made. If the store fails after
// some takes were made, the give-backs are attempted; a give-back that fails
// leaves its tokens spent (under-admission of at most that take's N).
//
// A non-nil error means the store failed; out and denied are then the answer
// of the policies: any FailClosed take denies the call, Fallback takes are
// decided together by their local engines (all or none), FailOpen takes are
// allowed.
func (l *Limiter) AllowAll(ctx context.Context, takes []Take, out []engine.Decision) (denied int, err error) {
	denied, _, err = l.allowAll(ctx, takes, out)
	return denied, err
}

// allowAll is AllowAll that also returns the server's time of the (last)
// script, for tests that replay decisions through an engine.
func (l *Limiter) allowAll(ctx context.Context, takes []Take, out []engine.Decision) (denied int, now time.Time, err error) {
	if len(out) < len(takes) {
		return -1, now, fmt.Errorf("%w: %d takes, %d decisions", ErrShortOut, len(takes), len(out))
	}
	if len(takes) == 0 {
		return -1, now, nil
	}
	if len(takes) == 1 {
		tl := takes[0].Limiter
		if tl == nil {
			tl = l
		}
		d, now, err := tl.allowOne(ctx, takes[0].Key, takes[0].N)
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
	for i := range takes {
		tl := takes[i].Limiter
		if tl == nil {
			tl = l
		}
		c := call{l: tl, key: tl.KeyFor(takes[i].Key), n: takes[i].N, cost: tl.scriptCost(takes[i].N)}
		if c.cost == tl.s.u.never() && never < 0 {
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
				if i != never && calls[i].cost <= calls[i].l.s.u.capacity {
					calls[i].cost += calls[i].l.s.u.capacity + 1
				}
			}
			if !sameSlot {
				return l.peekEach(ctx, takes, calls, out, never)
			}
		}
		denied, now, err = l.script(ctx, calls, out)
		if err != nil {
			return l.failed(takes, out), now, err
		}
		if never >= 0 {
			denied = never
		}
		count(calls, out, denied)
		return denied, now, nil
	}
	return l.sequence(ctx, takes, calls, out)
}

// call is one take in the script's terms.
type call struct {
	l   *Limiter
	key string
	n   float64
	// cost is in quanta; capacity+1+c asks the script for a report for a
	// cost of c without taking (see takeScript), and units.never marks a
	// take that can never pass.
	cost uint64
	at   int64 // the tick the take stored, for a give-back
}

// script runs takeScript over calls and fills out. It returns the index of
// the denied take (-1 for none) and the server's time.
func (l *Limiter) script(ctx context.Context, calls []call, out []engine.Decision) (int, time.Time, error) {
	keys := make([]string, len(calls))
	args := make([]string, 0, 5*len(calls))
	for i, c := range calls {
		keys[i] = c.key
		s := c.l.s
		args = append(args, s.capArg, s.pArg, s.qArg, s.fillArg, strconv.FormatUint(c.cost, 10))
	}
	v, err := l.call(ctx, takeLua, keys, args)
	if err != nil {
		return -1, time.Time{}, err
	}
	if len(v) != 2+2*len(calls) {
		return -1, time.Time{}, fmt.Errorf("%w: %d integers for %d takes", errReply, len(v), len(calls))
	}
	now := v[0]
	denied := int(v[1]) - 1
	for i := range calls {
		d, err := decision(calls[i].l.s.u, calls[i].cost, denied >= 0, v[2+2*i], v[3+2*i], now)
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
func (l *Limiter) sequence(ctx context.Context, takes []Take, calls []call, out []engine.Decision) (int, time.Time, error) {
	var now time.Time
	for i := range calls {
		k, t, err := l.script(ctx, calls[i:i+1], out[i:i+1])
		now = t
		if err == nil && k < 0 {
			continue
		}
		l.giveBack(ctx, calls[:i])
		if err != nil {
			return l.failed(takes, out), now, err
		}
		// Report every other take as denied, its bucket as it is now.
		for j := range calls {
			if j != i {
				calls[j].cost += calls[j].l.s.u.capacity + 1
			}
		}
		return l.peekEach(ctx, takes, calls, out, i)
	}
	count(calls, out, -1)
	return -1, now, nil
}

// peekEach fills out for calls whose costs all make the script report
// without taking, one key at a time, and counts a denial at k.
func (l *Limiter) peekEach(ctx context.Context, takes []Take, calls []call, out []engine.Decision, k int) (int, time.Time, error) {
	var now time.Time
	for j := range calls {
		if j == k && calls[j].cost <= calls[j].l.s.u.capacity {
			continue // the denial itself is already reported
		}
		_, t, err := l.script(ctx, calls[j:j+1], out[j:j+1])
		if err != nil {
			return l.failed(takes, out), t, err
		}
		now = t
	}
	count(calls, out, k)
	return k, now, nil
}

// giveBack refunds calls in reverse order.
func (l *Limiter) giveBack(ctx context.Context, calls []call) {
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		if c.cost == 0 {
			continue
		}
		s := c.l.s
		args := []string{s.capArg, s.pArg, s.qArg, s.fillArg, strconv.FormatUint(c.cost, 10), strconv.FormatInt(c.at, 10)}
		// A failed give-back leaves the tokens spent: never more admission.
		_, _ = l.call(ctx, refundLua, []string{c.key}, args)
	}
}

// count counts each take once in its Limiter's Stats.
func count(calls []call, out []engine.Decision, denied int) {
	for i := range calls {
		if denied < 0 {
			calls[i].l.stats.allowed.Add(1)
		} else {
			calls[i].l.stats.denied.Add(1)
			out[i].Allowed = false
		}
	}
}

// tl0 is the engine of the first local take.
func tl0(local []engine.Take) engine.Limiter { return local[0].Limiter }

// failed fills out with the policies' answer for a call the store could not
// decide, and returns the denied index.
func (l *Limiter) failed(takes []Take, out []engine.Decision) int {
	denied := -1
	var local []engine.Take
	var where []int
	for i := range takes {
		tl := takes[i].Limiter
		if tl == nil {
			tl = l
		}
		tl.stats.storeErrors.Add(1)
		switch tl.s.OnFailure {
		case FailOpen:
			tl.stats.failedOpen.Add(1)
			out[i] = engine.Decision{Allowed: true, Remaining: tl.s.Burst}
		case FailClosed:
			tl.stats.failedClosed.Add(1)
			out[i] = engine.Decision{RetryAfter: tl.s.Timeout}
			if denied < 0 {
				denied = i
			}
		case Fallback:
			tl.stats.fallback.Add(1)
			local = append(local, engine.Take{Limiter: tl.s.fallback, Key: takes[i].Key, N: takes[i].N})
			where = append(where, i)
		}
	}
	if len(local) > 0 {
		if denied >= 0 {
			for _, i := range where {
				out[i] = engine.Decision{RetryAfter: l.s.Timeout}
			}
		} else {
			dec := make([]engine.Decision, len(local))
			// The fallback engines are valid takes of a long enough out.
			if k, _ := tl0(local).TakeAll(context.Background(), local, dec); k >= 0 {
				denied = where[k]
			}
			for j, i := range where {
				out[i] = dec[j]
			}
		}
	}
	if denied >= 0 {
		for i := range takes {
			out[i].Allowed = false
		}
	}
	return denied
}
