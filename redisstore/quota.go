package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
)

// Quota is a calendar quota whose keys live in Redis: each key may take
// Quota tokens in each period of a calendar (engine.Calendar), shared by
// every instance on the same server and Prefix, with the Decisions of
// engine.Quota. A Store binds one for a Spec with a Calendar; Limiters and
// Quotas of one client decide a TakeAll together, all or none.
//
// It keeps the contract of a quota in a shared store (package engine,
// "Other shapes of limit"): the server's clock decides, and each take
// carries b1 and b2, the ends of the instance's period and of the next, in
// Unix milliseconds on whole minutes; the server's clock past b2 fails the
// take with ErrClockAhead. A key expires at its period's end (PXAT), so
// Redis holds only the keys used in their current period.
//
// While Redis fails, a Store's Quota falls back as its Limiters do
// (StoreOptions.FallbackShare): to a local engine.Quota with a share of
// the quota, over the same calendar, its error wrapping engine.ErrFallback.
// Each instance's local quota starts from nothing used, so an outage may
// admit up to a quota more per key and period across the instances, as a
// token bucket's fallback may admit up to a burst more. ErrClockAhead is
// no outage: no fallback decides it.
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

// prepare makes c a take of the quota at the instance's time now, by cal
// (nil: the quota's own): its capacity, and the bounds in Unix
// milliseconds.
func prepareQuota(q *remote.Quota, c *call, now time.Time, cal *engine.Calendar) {
	capacity, b1, b2 := q.Bounds(now, cal)
	c.u = units{capacity: capacity}
	c.b1, c.b2 = b1.UnixMilli(), b2.UnixMilli()
}

// quotaDecision is the Decision for a quota take of cost (script units,
// as decision's) from a period that ends at endMs and used used quanta
// after the take if it was made, at the server's time now (microseconds).
// A report (a cost above the capacity) waits as a denial does.
func quotaDecision(u units, cost uint64, denied bool, endMs, used, now int64) (engine.Decision, error) {
	d, err := remote.QuotaDecision(u.capacity, u.reportCost(cost), cost == u.never(), denied, cost > u.capacity,
		endMs*1000, used, now)
	if err != nil {
		return d, fmt.Errorf("%w: %w", errReply, err)
	}
	return d, nil
}

// Take takes n tokens from key's quota at the server's time, in the period
// of the quota's calendar, or in the period the key is still in: the
// Decision of engine.Quota.TakeAt. Errors are as Limiter.Take's (see
// Quota for the store's failure).
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
	return q.l.quota.Limit()
}

// Burst is the quota: the most one key can take in one period.
func (q *Quota) Burst() float64 { return q.l.quota.Burst() }

// Calendar returns the quota's own calendar.
func (q *Quota) Calendar() engine.Calendar { return q.l.quota.Calendar() }

// SetQuota gives every key n tokens per period of cal from this instance's
// next take on, as engine.Quota.SetQuota does: what each key took in its
// period stays (its key names neither the quota nor the calendar), a key
// keeps its period until that period ends, and the next begins by cal. It
// fails, changing nothing, for a quota or calendar engine.NewQuota
// refuses. Instances that share the keys apply a change as each reloads.
func (q *Quota) SetQuota(n float64, cal engine.Calendar) error {
	return q.l.quota.Set(n, cal, ErrInvalidConfig)
}

// KeyFor returns the Redis key of key's quota.
func (q *Quota) KeyFor(key string) string { return q.l.KeyFor(key) }

// Stats returns the quota's counters.
func (q *Quota) Stats() Stats { return q.l.Stats() }

// Close stops the fallback quota's sweeper.
func (q *Quota) Close() error {
	if q == nil {
		return engine.ErrNilLimiter
	}
	return q.l.Close()
}

// unwrapShapes returns takes with each *Quota and *Window replaced by its
// Limiter, or takes itself when none is either.
func unwrapShapes(takes []engine.Take) []engine.Take {
	found := false
	for i := range takes {
		switch takes[i].Limiter.(type) {
		case *Quota, *Window:
			found = true
		}
	}
	if !found {
		return takes
	}
	buf := make([]engine.Take, len(takes))
	copy(buf, takes)
	for i := range buf {
		var l *Limiter
		switch q := buf[i].Limiter.(type) {
		case *Quota:
			if q != nil {
				l = q.l
			}
		case *Window:
			if q != nil {
				l = q.l
			}
		default:
			continue
		}
		buf[i].Limiter = l
	}
	return buf
}
