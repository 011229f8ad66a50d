package remote

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// Quota is what a remote store's calendar quota keeps in the instance: its
// quota and calendar, which Set replaces whole, and the clock on which it
// reads the calendar. The store keeps what each key used; the instance
// sends each take the bounds of its periods (Bounds), since the store's
// scripts or statements have no time zone rules, and the store's clock
// picks between them. It is safe for concurrent use.
type Quota struct {
	set atomic.Pointer[quotaSet]
	// Now is the instance's clock: time.Now.
	Now func() time.Time
	// BoundsFor, if not nil, replaces the calendar's bounds: for tests
	// of a period's end, which cannot wait a day.
	BoundsFor func(now time.Time, cal engine.Calendar) (b1, b2 time.Time)
}

// quotaSet is a quota and calendar, and the bounds of the calendar last
// read: most takes find theirs there.
type quotaSet struct {
	n        float64
	cal      engine.Calendar
	capacity uint64
	period   atomic.Pointer[quotaPeriod]
}

// quotaPeriod is a period of a quota's own calendar, from start to b1, and
// the end of the next, b2.
type quotaPeriod struct {
	start, b1, b2 time.Time
}

// NewQuota returns the Quota of n tokens per period of cal, or the error of
// engine.CheckQuota wrapped in invalid (the store's ErrInvalidConfig).
func NewQuota(n float64, cal engine.Calendar, invalid error) (*Quota, error) {
	q := &Quota{Now: time.Now}
	if err := q.Set(n, cal, invalid); err != nil {
		return nil, err
	}
	return q, nil
}

// Set gives the quota n tokens per period of cal from its next take on. It
// fails, changing nothing, with engine.CheckQuota's error wrapped in
// invalid.
func (q *Quota) Set(n float64, cal engine.Calendar, invalid error) error {
	if err := engine.CheckQuota(n, cal); err != nil {
		return fmt.Errorf("%w: %w", invalid, err)
	}
	capacity, _ := fixedpoint.QuantizeExact(n)
	q.set.Store(&quotaSet{n: n, cal: cal, capacity: capacity})
	return nil
}

// Limit is the quota over its period's nominal length.
func (q *Quota) Limit() engine.Limit {
	set := q.set.Load()
	return engine.Limit(set.n / set.cal.Period.Nominal().Seconds())
}

// Burst is the quota.
func (q *Quota) Burst() float64 { return q.set.Load().n }

// Calendar is the quota's own calendar.
func (q *Quota) Calendar() engine.Calendar { return q.set.Load().cal }

// Bounds returns the quota's capacity in quanta and, for a take at the
// instance's time now by cal (nil: the quota's own calendar), b1, the end
// of the period that holds now, and b2, the end of the next, each rounded
// up to a whole minute as engine.Quota stores its ends.
func (q *Quota) Bounds(now time.Time, cal *engine.Calendar) (capacity uint64, b1, b2 time.Time) {
	set := q.set.Load()
	if q.BoundsFor != nil {
		c := set.cal
		if cal != nil {
			c = *cal
		}
		b1, b2 = q.BoundsFor(now, c)
		return set.capacity, b1, b2
	}
	if cal != nil {
		_, end := cal.Bounds(now)
		_, next := cal.Bounds(end)
		return set.capacity, ceilMinute(end), ceilMinute(next)
	}
	if p := set.period.Load(); p != nil && !now.Before(p.start) && now.Before(p.b1) {
		return set.capacity, p.b1, p.b2
	}
	start, end := set.cal.Bounds(now)
	_, next := set.cal.Bounds(end)
	p := &quotaPeriod{start: start, b1: ceilMinute(end), b2: ceilMinute(next)}
	set.period.Store(p)
	return set.capacity, p.b1, p.b2
}

// ceilMinute is t rounded up to a whole minute since the Unix epoch.
func ceilMinute(t time.Time) time.Time {
	ns := t.UnixNano()
	m := ns / int64(time.Minute)
	if ns%int64(time.Minute) > 0 {
		m++
	}
	return time.Unix(m*60, 0)
}

// QuotaDecision is the Decision of a quota take from a period that ends at
// microsecond end with used quanta used (after the take, if it was made),
// at the store's time now (microseconds), as engine.Quota decides it: cost
// is the take's cost in quanta (never: one that can never pass), denied
// reports that it, or another take of the call, was not made, and waits
// that the take asks for a report, as a denial does. Remaining is the
// quota less what was used, ResetAfter the time to the end when something
// was, RetryAfter the time to the end when the cost does not fit.
func QuotaDecision(capacity, cost uint64, never, denied, waits bool, end, used, now int64) (engine.Decision, error) {
	wait := time.Duration(end-now) * time.Microsecond
	if wait <= 0 || used < 0 || used > 1e12 {
		return engine.Decision{}, fmt.Errorf("a quota period ending at %d with %d used at %d", end, used, now)
	}
	d := engine.Decision{Allowed: !denied, Remaining: float64(capacity-min(uint64(used), capacity)) / 1000}
	if used > 0 {
		d.ResetAfter = wait
	}
	switch {
	case never:
		d.Allowed = false
		d.RetryAfter = engine.InfDuration
	case (denied || waits) && uint64(used)+cost > capacity:
		d.RetryAfter = wait
	}
	return d, nil
}
