package engine

import (
	"strings"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// ReserveWithin reserves n tokens of key's bucket at time t, as ReserveN
// does, if they are due no later than wait after t; if they would come
// later, it takes nothing. It fills r, which the caller owns and may reuse
// once done with it, so that a reservation allocates nothing unless it has
// to wait. It returns the decision:
//
//   - Allowed reports r.OK();
//   - Remaining is what the bucket holds once the tokens are taken: 0 for
//     a reservation that waits, whose tokens come from the refill;
//   - RetryAfter, when not OK, is how long after t the tokens would be
//     due (InfDuration if never): a reservation made that much less wait
//     later would have them in time;
//   - ResetAfter is how long after t the bucket is full again.
//
// A reservation that waits keeps a copy of key, so the caller may reuse
// key's bytes at once; one due at t refers to key until it is given up.
// A wait of 0 makes ReserveWithin a take that Cancel can undo.
func (e *Engine) ReserveWithin(r *Reservation, t time.Time, key string, n float64, wait time.Duration) Decision {
	ns := e.nanosAt(t)
	cost, ok := fixedpoint.Quantize(n)
	if !ok {
		cost = fixedpoint.Never
	}
	act, h, res, now := e.reserveDecided(ns, BoundedKey(key), cost, max(wait, 0))
	if res == reserved && act > ns {
		// Given back, if ever, long after the caller's bytes are reused.
		h.key = strings.Clone(h.key)
	}
	*r = Reservation{e: e, ns: ns, act: act, h: h, ok: res == reserved}
	switch {
	case res == reserved && act <= ns:
		return now
	case res == reserved:
		return Decision{Allowed: true, ResetAfter: time.Duration(act-ns) + e.current().fillTime()}
	case res == noRoom:
		// No bucket to wait on: denied as a take under FullDeny is.
		return Decision{RetryAfter: e.current().fillTime()}
	}
	wait = InfDuration
	if res == late {
		wait = time.Duration(act - ns)
	}
	return Decision{RetryAfter: wait, ResetAfter: wait}
}

// fillTime is how long the generation's refill takes to fill an empty
// bucket.
func (g *generation) fillTime() time.Duration {
	return time.Duration(g.burst / float64(g.limit) * float64(time.Second))
}
