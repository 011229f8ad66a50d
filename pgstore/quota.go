package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
)

// Quota is a calendar quota whose keys live in the bucket table: each key
// may take Quota tokens in each period of a calendar (engine.Calendar),
// shared by every instance on the same table and Prefix, with the
// Decisions of engine.Quota. A Store binds one for a Spec with a Calendar;
// Limiters and Quotas of one Store decide a TakeAll together, in one
// statement, all or none.
//
// It keeps the contract of a quota in a shared store (package engine,
// "Other shapes of limit"): the database's clock decides, and each take
// carries b1 and b2, the ends of the instance's period and of the next, in
// Unix microseconds on whole minutes; the database's clock past b2 fails
// the take with ErrClockAhead. A key's row holds the end of its period and
// what it used, and expires at that end: Sweep removes it once the period
// ended.
//
// While the database fails, a Store's Quota falls back as its Limiters do
// (StoreOptions.FallbackShare): to a local engine.Quota with a share of
// the quota, over the same calendar, its error wrapping engine.ErrFallback.
// Each instance's local quota starts from nothing used, so an outage may
// admit up to a quota more per key and period across the instances, as a
// token bucket's fallback may admit up to a burst more. ErrClockAhead is
// no outage: no fallback decides it.
//
// A Quota's takes do not coalesce: each is a statement of its own.
type Quota struct{ l *Limiter }

var _ engine.QuotaRetuner = (*Quota)(nil)

// ErrClockAhead is wrapped by the error of a quota take that needed a new
// period while the database's clock was past the end of the period after
// the instance's: the two clocks differ by more than a period, and neither
// can be trusted to pick it. Such errors also wrap engine.ErrUnavailable:
// nothing was taken.
var ErrClockAhead = errors.New("pgstore: the database's clock is more than a quota period ahead of the instance's")

// newQuota returns the Quota of spec, a Spec with a Calendar, with the
// Store's options: rows under Prefix, the ID, then "quota:"; its fallback
// is a local quota at FallbackShare of spec's, or at 1/N with peers.
func newQuota(db DB, o *StoreOptions, spec engine.Spec, peers *Peers) (*Quota, error) {
	q, err := remote.NewQuota(spec.Burst, *spec.Calendar, ErrInvalidConfig)
	if err != nil {
		return nil, err
	}
	// A token bucket's checks, of a limit every option combines with, for
	// the options; the quota replaces its units, key base and core.
	cfg := Config{Limit: 1, Burst: 1, Table: o.Table, Prefix: o.Prefix + quoteID(spec.ID) + ":",
		Timeout: o.Timeout, BreakAfter: o.BreakAfter, BreakFor: o.BreakFor, OnFailure: FailClosed}
	l, err := New(db, cfg)
	if err != nil {
		return nil, err
	}
	common := l.s.common
	common.OnFailure, common.FallbackShare, common.FallbackMaxKeys = Fallback, o.FallbackShare, o.FallbackMaxKeys
	if o.FallbackShare == 0 {
		common.FallbackPeers = peers
	}
	if l.core, err = remote.NewQuotaCore(common, q, ErrBreakerOpen); err != nil {
		return nil, err
	}
	l.s.keyBase = l.s.Prefix + "quota:"
	l.quota = q
	return &Quota{l: l}, nil
}

// Take takes n tokens from key's quota at the database's time, in the
// period of the quota's calendar, or in the period the key is still in:
// the Decision of engine.Quota.TakeAt. Errors are as Limiter.Take's (see
// Quota for the store's failure).
func (q *Quota) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	if q == nil {
		return engine.Decision{}, engine.ErrNilLimiter
	}
	var out [1]engine.Decision
	_, _, err := q.l.takeAll(ctx, []engine.Take{{Limiter: q.l, Key: key, N: n}}, out[:], nil)
	return out[0], err
}

// TakeAll is Limiter.TakeAll: takes may name Limiters and Quotas of one
// Store, and a quota's take may bring its own calendar
// (engine.Take.Calendar).
func (q *Quota) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	if q == nil {
		return -1, engine.ErrNilLimiter
	}
	return q.l.TakeAll(ctx, takes, out)
}

// Limit is the quota's average rate: Quota over its period's nominal
// length (engine.Period.Nominal).
func (q *Quota) Limit() engine.Limit { return q.l.quota.Limit() }

// Burst is the quota: the most one key can take in one period.
func (q *Quota) Burst() float64 { return q.l.quota.Burst() }

// Calendar returns the quota's own calendar.
func (q *Quota) Calendar() engine.Calendar { return q.l.quota.Calendar() }

// SetQuota gives every key n tokens per period of cal from this instance's
// next take on, as engine.Quota.SetQuota does: what each key took in its
// period stays (its row names neither the quota nor the calendar), a key
// keeps its period until that period ends, and the next begins by cal. It
// fails, changing nothing, for a quota or calendar engine.NewQuota
// refuses. Instances that share the rows apply a change as each reloads.
func (q *Quota) SetQuota(n float64, cal engine.Calendar) error {
	return q.l.quota.Set(n, cal, ErrInvalidConfig)
}

// KeyFor returns the key of key's row in the table.
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

// quotaRefused is the error of a quota Spec on a store with leases.
func quotaRefused(spec engine.Spec) error {
	return fmt.Errorf("%w: %q is a calendar quota, which a store with leases (StoreOptions.Lease) does not keep", ErrInvalidConfig, spec.Name)
}
