package failpolicy

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Take is one take of a call the store could not decide, with the policy of
// its Limiter.
type Take struct {
	Policy Policy
	// Fallback is the Limiter's local engine, with Policy Fallback.
	Fallback *engine.Engine
	// Peers, if not nil, sets Fallback's share of Limit and Burst before
	// it decides: 1/Peers.N() (Retune). Nil leaves the engine as it is (a
	// fixed share).
	Peers *Peers
	// Limit is the Limiter's: with Peers, the limit shared.
	Limit engine.Limit
	// Timeout is the Limiter's deadline: a denial's RetryAfter.
	Timeout time.Duration
	// Burst is the Limiter's: a fail-open answer's Remaining and, with
	// Peers, the burst shared.
	Burst float64
	Key   string
	N     float64

	// Quota, with Policy Fallback, is the local calendar quota of a
	// Limiter that keeps one, in place of Fallback: it decides with
	// QuotaCalendar (the Limiter's own; Burst is its quota) at a share of
	// the quota, 1/Peers.N() or Share (RetuneQuota), and Calendar is the
	// take's own calendar (engine.Take.Calendar).
	Quota         *engine.Quota
	QuotaCalendar engine.Calendar
	Calendar      *engine.Calendar
	Share         float64

	// Window, with Policy Fallback, is the local strict window of a
	// Limiter that keeps one, in place of Fallback: it decides at a share
	// of the limit (Burst), 1/Peers.N() or Share (RetuneWindow).
	Window *engine.Window
}

// Answer fills out with the policies' answer for a call of takes (a Take,
// or the takes of a TakeAll, all or none) the store could not decide, and
// returns the index of the denied take (-1: all allowed) and whether the
// local engines decided the whole call (every take's policy is Fallback),
// whose Decisions then stand. FailOpen takes are allowed; any FailClosed
// take denies the call; Fallback takes are decided together by their
// engines, all or none.
func Answer(takes []Take, out []engine.Decision) (denied int, fellBack bool) {
	denied = -1
	var local []engine.Take
	var where []int
	for i, t := range takes {
		switch t.Policy {
		case FailOpen:
			out[i] = engine.Decision{Allowed: true, Remaining: t.Burst}
		case FailClosed:
			out[i] = engine.Decision{RetryAfter: t.Timeout}
			if denied < 0 {
				denied = i
			}
		case Fallback:
			if t.Quota != nil {
				share := t.Share
				if t.Peers != nil {
					share = t.Peers.Share()
				}
				RetuneQuota(t.Quota, t.Burst, t.QuotaCalendar, share)
				local = append(local, engine.Take{Limiter: t.Quota, Key: t.Key, N: t.N, Calendar: t.Calendar})
				where = append(where, i)
				continue
			}
			if t.Window != nil {
				share := t.Share
				if t.Peers != nil {
					share = t.Peers.Share()
				}
				RetuneWindow(t.Window, t.Burst, share)
				local = append(local, engine.Take{Limiter: t.Window, Key: t.Key, N: t.N})
				where = append(where, i)
				continue
			}
			if t.Peers != nil {
				Retune(t.Fallback, t.Limit, t.Burst, t.Peers.Share())
			}
			local = append(local, engine.Take{Limiter: t.Fallback, Key: t.Key, N: t.N})
			where = append(where, i)
		}
	}
	if len(local) > 0 {
		if denied >= 0 {
			for _, i := range where {
				out[i] = engine.Decision{RetryAfter: takes[i].Timeout}
			}
		} else {
			dec := make([]engine.Decision, len(local))
			// Engines, and an out as long as the takes: no error.
			if k, _ := local[0].Limiter.TakeAll(context.Background(), local, dec); k >= 0 {
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
	return denied, len(where) == len(takes)
}

// Error is the error a store returns for a call that failed with err:
// prefixed with the store's name, wrapping engine.ErrUnavailable when
// nothing was taken for certain, else engine.ErrOutcomeUnknown, and
// engine.ErrFallback first when the local engines decided the whole call.
func Error(store string, err error, nothingTaken, fellBack bool) error {
	class := engine.ErrOutcomeUnknown
	if nothingTaken {
		class = engine.ErrUnavailable
	}
	if fellBack {
		return fmt.Errorf("%s: %w: %w: %w", store, engine.ErrFallback, class, err)
	}
	return fmt.Errorf("%s: %w: %w", store, class, err)
}

// Counters counts a Limiter's takes that the store failed to decide, by the
// policy that answered them. The zero value is ready; it is safe for
// concurrent use.
type Counters struct {
	StoreErrors, FailedOpen, FailedClosed, Fallback atomic.Uint64
}

// Count counts one take answered by p.
func (c *Counters) Count(p Policy) {
	c.StoreErrors.Add(1)
	switch p {
	case FailOpen:
		c.FailedOpen.Add(1)
	case FailClosed:
		c.FailedClosed.Add(1)
	case Fallback:
		c.Fallback.Add(1)
	}
}
