package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// Quota is a calendar quota whose keys live in Redis: each key may take
// Quota tokens in each period of a calendar (engine.Calendar), shared by
// every instance on the same server and Prefix, with the Decisions of
// engine.Quota. A Store binds one for a Spec with a Calendar; Limiters and
// Quotas of one client decide a TakeAll together, all or none.
//
// The server's clock decides, as for token buckets; the instance reads the
// calendar. Lua has no time zone rules, so each take carries b1, the end
// of the period that holds the instance's clock (time.Now) by the take's
// calendar (engine.Take.Calendar, or the quota's), and b2, the end of the
// period after it, both in Unix milliseconds on whole minutes, as an
// engine.Quota stores its ends. The script reads the server's clock T:
//
//   - a key that took something in a period that ends after T is still in
//     that period, even if T is before b1's period begins (a clock that
//     steps back stays in the period it was in);
//   - otherwise a new period begins, ending at b1 if T is before b1, else
//     at b2 if T is before b2;
//   - otherwise (T at or past b2: the server's clock more than a period
//     ahead of the instance's) the take fails with an error wrapping
//     ErrClockAhead and engine.ErrUnavailable, takes nothing and never
//     admits: the caller's failure policy answers it.
//
// Near a renewal, clocks a few seconds apart agree on where periods end:
// the server's clock picks between b1 and b2, so an instance whose clock
// is s seconds behind the server's still renews each key at the server's
// b1. One s seconds ahead sends the next period's bounds for the last s
// seconds of a period: a key in its period keeps it to its end, and a key
// that begins a period then begins the next one, a few seconds early (what
// it takes counts toward that period).
//
// A denial writes nothing. Its RetryAfter is the time to the period's end
// (InfDuration for a cost above the quota), Remaining the quota less what
// the period used, and ResetAfter the time to its end when something was
// used. A key expires at its period's end (PXAT): a period that ended and
// a missing key are the same, so Redis holds only the keys used in their
// current period. One consequence, as for token buckets: a server clock
// that steps back after a key expired finds no period, and begins one.
//
// A Quota is not batched: each Take is one script of its own.
type Quota struct{ l *Limiter }

var _ engine.QuotaRetuner = (*Quota)(nil)

// ErrClockAhead is wrapped by the error of a quota take that needed a new
// period while the server's clock was past the end of the period after the
// instance's: the two clocks differ by more than a period, and neither can
// be trusted to pick it. Such errors also wrap engine.ErrUnavailable:
// nothing was taken.
var ErrClockAhead = errors.New("redisstore: the server's clock is more than a quota period ahead of the instance's")

// quotaState is a quota Limiter's quota and calendar, and its clock.
type quotaState struct {
	set atomic.Pointer[quotaSet]
	// now is the instance's clock the bounds are read on: time.Now.
	now func() time.Time
	// boundsFor, if not nil, replaces the calendar's bounds (a test's).
	boundsFor func(now time.Time, cal engine.Calendar) (b1, b2 int64)
}

// quotaSet is a quota and calendar, replaced whole by SetQuota.
type quotaSet struct {
	n        float64
	cal      engine.Calendar
	capacity uint64
	// period caches the bounds of cal around the instant they were last
	// read: most takes find them there.
	period atomic.Pointer[quotaBounds]
}

// quotaBounds are the bounds b1, b2 of the instants from start to b1.
type quotaBounds struct {
	start  time.Time
	b1, b2 int64 // Unix milliseconds
	end    time.Time
}

func newQuotaState(n float64, cal engine.Calendar) (*quotaState, error) {
	q := &quotaState{now: time.Now}
	if err := q.setQuota(n, cal); err != nil {
		return nil, err
	}
	return q, nil
}

func (q *quotaState) setQuota(n float64, cal engine.Calendar) error {
	if err := engine.CheckQuota(n, cal); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	capacity, _ := fixedpoint.QuantizeExact(n)
	q.set.Store(&quotaSet{n: n, cal: cal, capacity: capacity})
	return nil
}

// bounds returns b1 and b2 of cal (nil: the quota's) at the instance's
// time now: the ends, in Unix milliseconds rounded up to whole minutes, of
// the period that holds now and of the next.
func (q *quotaState) bounds(set *quotaSet, now time.Time, cal *engine.Calendar) (b1, b2 int64) {
	if q.boundsFor != nil {
		c := set.cal
		if cal != nil {
			c = *cal
		}
		return q.boundsFor(now, c)
	}
	if cal == nil {
		if p := set.period.Load(); p != nil && !now.Before(p.start) && now.Before(p.end) {
			return p.b1, p.b2
		}
		start, end := set.cal.Bounds(now)
		_, next := set.cal.Bounds(end)
		p := &quotaBounds{start: start, end: end, b1: minuteMillis(end), b2: minuteMillis(next)}
		set.period.Store(p)
		return p.b1, p.b2
	}
	_, end := cal.Bounds(now)
	_, next := cal.Bounds(end)
	return minuteMillis(end), minuteMillis(next)
}

// minuteMillis is t in Unix milliseconds, rounded up to a whole minute.
func minuteMillis(t time.Time) int64 {
	ns := t.UnixNano()
	m := ns / int64(time.Minute)
	if ns%int64(time.Minute) > 0 {
		m++
	}
	return m * 60000
}

// prepare makes c a take of the quota at the instance's time now, by cal
// (nil: the quota's own).
func (q *quotaState) prepare(c *call, now time.Time, cal *engine.Calendar) {
	set := q.set.Load()
	c.u = units{capacity: set.capacity}
	c.b1, c.b2 = q.bounds(set, now, cal)
}

// quotaDecision is the Decision for a quota take of cost (script units,
// as decision's) from a period that ends at endMs and used used quanta
// after the take if it was made, at the server's time now (microseconds).
// A report (a cost above the capacity) waits as a denial does.
func quotaDecision(u units, cost uint64, denied bool, endMs, used, now int64) (engine.Decision, error) {
	wait := time.Duration(endMs*1000-now) * time.Microsecond
	if wait <= 0 || used < 0 || used > 1e12 {
		return engine.Decision{}, fmt.Errorf("%w: a period ending at %d with %d used at %d", errReply, endMs, used, now)
	}
	left := u.capacity - min(uint64(used), u.capacity)
	d := engine.Decision{Allowed: !denied, Remaining: float64(left) / 1000}
	if used > 0 {
		d.ResetAfter = wait
	}
	switch {
	case cost == u.never():
		d.RetryAfter = engine.InfDuration
	case (denied || cost > u.capacity) && uint64(used)+u.reportCost(cost) > u.capacity:
		d.RetryAfter = wait
	}
	return d, nil
}

// Take takes n tokens from key's quota at the server's time, in the period
// of the quota's calendar, or in the period the key is still in: the
// Decision of engine.Quota.TakeAt. Errors are as Limiter.Take's; the
// policy that answers a failure is FailClosed (see Store).
func (q *Quota) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	if q == nil {
		return engine.Decision{}, engine.ErrNilLimiter
	}
	var out [1]engine.Decision
	_, err := q.l.TakeAll(ctx, []engine.Take{{Limiter: q.l, Key: key, N: n}}, out[:])
	return out[0], err
}

// TakeAll is Limiter.TakeAll: takes may name Limiters and Quotas of one
// client, and a quota's take may bring its own calendar
// (engine.Take.Calendar).
func (q *Quota) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	if q == nil {
		return -1, engine.ErrNilLimiter
	}
	return q.l.TakeAll(ctx, takes, out)
}

// Limit is the quota's average rate: Quota over its period's nominal
// length (engine.Period.Nominal).
func (q *Quota) Limit() engine.Limit {
	set := q.l.quota.set.Load()
	return engine.Limit(set.n / set.cal.Period.Nominal().Seconds())
}

// Burst is the quota: the most one key can take in one period.
func (q *Quota) Burst() float64 { return q.l.quota.set.Load().n }

// Calendar returns the quota's own calendar.
func (q *Quota) Calendar() engine.Calendar { return q.l.quota.set.Load().cal }

// SetQuota gives every key n tokens per period of cal from this instance's
// next take on, as engine.Quota.SetQuota does: what each key took in its
// period stays (its key names neither the quota nor the calendar), a key
// keeps its period until that period ends, and the next begins by cal. It
// fails, changing nothing, for a quota or calendar engine.NewQuota
// refuses. Instances that share the keys apply a change as each reloads.
func (q *Quota) SetQuota(n float64, cal engine.Calendar) error {
	return q.l.quota.setQuota(n, cal)
}

// KeyFor returns the Redis key of key's quota.
func (q *Quota) KeyFor(key string) string { return q.l.KeyFor(key) }

// Stats returns the quota's counters.
func (q *Quota) Stats() Stats { return q.l.Stats() }

// Close releases nothing: a Quota has no fallback.
func (q *Quota) Close() error {
	if q == nil {
		return engine.ErrNilLimiter
	}
	return q.l.Close()
}

// unwrapQuotas returns takes with each *Quota replaced by its Limiter, or
// takes itself when none is a Quota.
func unwrapQuotas(takes []engine.Take) []engine.Take {
	found := false
	for i := range takes {
		if _, ok := takes[i].Limiter.(*Quota); ok {
			found = true
			break
		}
	}
	if !found {
		return takes
	}
	buf := make([]engine.Take, len(takes))
	copy(buf, takes)
	for i := range buf {
		if q, ok := buf[i].Limiter.(*Quota); ok {
			var l *Limiter
			if q != nil {
				l = q.l
			}
			buf[i].Limiter = l
		}
	}
	return buf
}
