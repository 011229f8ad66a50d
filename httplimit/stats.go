package httplimit

import (
	"sync/atomic"

	"github.com/faucetgo/faucet/engine"
)

// statser is a Limiter that counts its buckets: the Engine.
type statser interface {
	Stats() engine.Stats
}

// ruleCounters count one rule's decisions; they belong to the rule's name and
// survive reloads.
type ruleCounters struct {
	allowed, nearLimit, denied, shadowDenied, failedOpen, failedClosed, fellBack, refused, delayed atomic.Uint64
}

// allow counts an admitted request, near the limit if it left its bucket
// under a fifth of the burst (envoyproxy/ratelimit's near-limit ratio).
func (c *ruleCounters) allow(p *Policy) {
	c.allowed.Add(1)
	if p.Remaining < p.Burst/5 {
		c.nearLimit.Add(1)
	}
}

// RuleStats is a snapshot of one rule's counters: of one limit, for a
// rule with several.
type RuleStats struct {
	// Name is the rule's, or the limit's.
	Name string
	// Rule is the name of the rule a limit belongs to; empty for a rule
	// with one limit.
	Rule string
	// Mode is "enforce" or "shadow".
	Mode string
	// Allowed counts requests the rule passed (a shadow rule: would have).
	Allowed uint64
	// NearLimit counts those of them that left the bucket under a fifth
	// of its burst.
	NearLimit uint64
	// Denied counts requests the rule denied.
	Denied uint64
	// ShadowDenied counts requests a shadow rule would have denied.
	ShadowDenied uint64
	// Refused counts requests the rule answered 400: a cost that is
	// malformed or outside its min_cost and max_cost (invalid_cost), or a
	// value it reads without a single value (ambiguous_value).
	Refused uint64
	// FailedOpen and FailedClosed count requests the store could not decide,
	// admitted (fail_mode open) or answered 503 (fail_mode closed, or
	// fallback without a fallback decision).
	FailedOpen, FailedClosed uint64
	// Fallback counts requests the store could not decide that its
	// in-memory fallback decided for the rule (fail_mode fallback): the
	// requests it passed, also counted in Allowed, and those it denied,
	// also in Denied.
	Fallback uint64
	// Live, Evicted and Overflow are the rule's bucket counts (see
	// engine.Stats), when HasBuckets: when its Limiter can count them, as
	// an engine.Engine can.
	Live       int
	Evicted    uint64
	Overflow   uint64
	HasBuckets bool
	// Delayed counts the requests the rule admitted after a wait (delay
	// mode), also counted in Allowed.
	Delayed uint64
	// InFlight is how many requests hold a slot of an in-flight limit
	// now, across its keys.
	InFlight int64
	// Rate is the rule's rate now, tokens per second: an adaptive rule's
	// moves between its floor and its own rate.
	Rate float64
	// Shape is the limit's shape, as Policy.Shape names it ("" for a
	// token bucket). Delay reports a rule in delay mode, Adaptive one whose
	// rate adapts.
	Shape           string
	Delay, Adaptive bool
}

// Stats returns the counters of the rules in force, in rule order.
func (l *Middleware) Stats() []RuleStats {
	set := l.set.Load()
	out := make([]RuleStats, len(set.rules))
	for i, r := range set.rules {
		c := r.counters
		s := RuleStats{Name: r.Name, Rule: r.limitOf, Mode: r.Mode, Allowed: c.allowed.Load(), NearLimit: c.nearLimit.Load(), Denied: c.denied.Load(),
			ShadowDenied: c.shadowDenied.Load(), Refused: c.refused.Load(), FailedOpen: c.failedOpen.Load(), FailedClosed: c.failedClosed.Load(),
			Fallback: c.fellBack.Load(), Delayed: c.delayed.Load(), Rate: r.rate(), Shape: r.shape(),
			Delay: r.Delay.MaxDelay != 0, Adaptive: r.adapt != nil}
		if r.inflight != nil {
			s.InFlight = r.inflight.total.Load() + r.inflight.remoteHeld.Load()
		}
		if st, ok := r.lim.(statser); ok {
			es := st.Stats()
			s.Live, s.Evicted, s.Overflow, s.HasBuckets = es.Live, es.Evicted, es.Overflow, true
		}
		out[i] = s
	}
	return out
}
