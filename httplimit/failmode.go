package httplimit

import (
	"errors"
	"net/http"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// failed answers a request whose take the store could not decide (err),
// by the fail_mode of each rule that applied: any "closed" rule answers
// 503; "open" rules are admitted with their state unknown; "fallback"
// rules keep the decisions of the store's in-memory fallback when it made
// them (err wraps engine.ErrFallback), and answer 503 when it did not. It
// returns the takes, decisions and policy indices of the fallback rules and
// their denied index, for enforce to apply, whether the fallback made
// those decisions, and false when the request is already answered.
func (l *Middleware) failed(q *request, now time.Time, res *Result, applied []*rule, takes []engine.Take, out []engine.Decision, idx []int, denied int, err error) ([]engine.Take, []engine.Decision, []int, int, bool, bool) {
	res.StoreError = true
	closed, fallback := false, false
	for _, i := range idx {
		closed = closed || applied[i].closed
		fallback = fallback || !applied[i].open && !applied[i].closed
	}
	if closed || fallback && !errors.Is(err, engine.ErrFallback) {
		l.unavailable(res, applied, idx)
		return nil, nil, nil, 0, false, false
	}
	// Open rules leave the set; the fallback's decisions of the others
	// stand, unless an open rule's fallback bucket was the one that denied.
	keep, kept, openDenied := 0, -1, false
	for j, i := range idx {
		if applied[i].open {
			res.Policies[i].Unknown = true
			applied[i].counters.failedOpen.Add(1)
			openDenied = openDenied || j == denied
			continue
		}
		if j == denied {
			kept = keep
		}
		takes[keep], out[keep], idx[keep] = takes[j], out[j], i
		keep++
	}
	takes, out, idx = takes[:keep], out[:keep], idx[:keep]
	if keep == 0 {
		return nil, nil, nil, 0, false, false
	}
	if !openDenied {
		return takes, out, idx, kept, true, true
	}
	// All or none: the denial took nothing, so the fallback rules are
	// decided again on their own. An open rule must not deny them.
	denied, err = takeAll(q.r.Context(), now, takes, out)
	if err != nil && !errors.Is(err, engine.ErrFallback) {
		l.unavailable(res, applied, idx)
		return nil, nil, nil, 0, false, false
	}
	return takes, out, idx, denied, err != nil, true
}

// unavailable answers 503: the store failed and a rule that applied
// fails closed, or has no fallback decision.
func (l *Middleware) unavailable(res *Result, applied []*rule, idx []int) {
	for _, i := range idx {
		res.Policies[i].Unknown = true
		applied[i].counters.failedClosed.Add(1)
	}
	res.Allowed, res.Status, res.Reason, res.RetryAfter = false, http.StatusServiceUnavailable, ReasonStoreUnavailable, 1
}
