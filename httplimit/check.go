package httplimit

import (
	"math"
	"net/http"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// maxTakes is how many rules one request can meet without allocating for
// the takes.
const maxTakes = 8

// Result is the decision on one request.
type Result struct {
	// Allowed reports whether the request may proceed.
	Allowed bool `json:"allowed"`
	// Status is 200 when allowed, 429 when a rule denied, 400 when a rule
	// refused the cost the client sent (cost_out_of_range "reject"), 503 when
	// the store failed and a rule that applied has fail_mode "closed".
	Status int `json:"status"`
	// Reason is empty, or one of the Reason constants (with the shadow
	// prefix when a shadow rule would have denied an allowed request).
	Reason string `json:"reason,omitempty"`
	// DeniedBy names the rule that denied (or, for a shadow reason, would
	// have).
	DeniedBy string `json:"denied_by,omitempty"`
	// Detail says why a cost was refused (Status 400): the source and the
	// bound it broke.
	Detail string `json:"detail,omitempty"`
	// RetryAfter is the Retry-After value in seconds, jitter included; 0
	// when the response carries none.
	RetryAfter int64 `json:"retry_after,omitempty"`
	// Policies has one entry per rule that applied, in rule order.
	Policies []Policy `json:"policies"`

	opts   *options
	denier *rule
}

// Policy is one applied rule's state after the decision.
type Policy struct {
	Name string `json:"name"`
	// Mode is "enforce" or "shadow".
	Mode string `json:"mode"`
	// Key is the request's bucket key under the rule.
	Key string `json:"key"`
	// Quota and Window are RateLimit-Policy's q (the burst, rounded down)
	// and w (seconds to refill an empty bucket, rounded up).
	Quota  int64 `json:"quota"`
	Window int64 `json:"window"`
	// Cost is the request's cost under the rule.
	Cost float64 `json:"cost"`
	// Remaining is the tokens the bucket holds after the decision.
	Remaining float64 `json:"remaining"`
	// Reset is RateLimit's t: whole seconds until a request of the same cost
	// could pass (0 if it could now), or -1 if it never can.
	Reset int64 `json:"reset"`
	// Full is whole seconds until the bucket is full (legacy Reset fields).
	Full int64 `json:"full"`
	// Denied reports that this rule denied the request (in shadow mode:
	// would have).
	Denied bool `json:"denied"`
	// Unknown reports that the bucket's state is not known, because the
	// store failed or the request was refused before any take: the other
	// state fields are 0.
	Unknown bool `json:"unknown,omitempty"`

	rule *rule
}

// Check decides on r under the rules in force, takes the tokens of an
// admitted request, and returns the decision; it writes nothing. Handler is
// Check plus the response.
func (l *Limiter) Check(r *http.Request) Result {
	return l.check(r, -1, false)
}

// check is Check with an optional cost for every rule (override >= 0); with
// direct, RemoteAddr is the client whatever the trusted proxies.
func (l *Limiter) check(r *http.Request, override float64, direct bool) Result {
	set := l.set.Load()
	q := request{r: r, o: l.opts, direct: direct}
	var appliedBuf [maxTakes]*rule
	applied := appliedBuf[:0]
	for _, g := range set.groups {
		for _, ru := range g {
			if ru.matches(&q) {
				applied = append(applied, ru)
				break
			}
		}
	}
	res := Result{Allowed: true, Status: http.StatusOK, opts: l.opts, Policies: make([]Policy, len(applied))}
	if len(applied) == 0 {
		return res
	}
	now := l.opts.now()
	var takeBuf [maxTakes]Take
	var outBuf [maxTakes]engine.Decision
	var idxBuf [maxTakes]int
	takes, out, idx := takeBuf[:0], outBuf[:], idxBuf[:0]
	if len(applied) > maxTakes {
		out = make([]engine.Decision, len(applied))
	}
	refuser := -1 // the first enforce rule that refuses the request's cost
	for i, ru := range applied {
		p := &res.Policies[i]
		p.Name, p.Mode, p.rule = ru.Name, ru.Mode, ru
		p.Quota, p.Window = int64(math.Floor(ru.Burst)), int64(math.Ceil(ru.Burst/ru.Rate))
		p.Key = q.key(ru.keys)
		var why string
		if override < 0 {
			p.Cost, why = ru.cost.cost(r, q.params)
		} else {
			p.Cost, why = ru.cost.bound(override, false)
		}
		if why != "" {
			l.refused(&res, ru, p, why, &refuser, i)
			continue
		}
		if !ru.shadow {
			takes = append(takes, Take{Handle: ru.handle, Key: p.Key, N: p.Cost})
			idx = append(idx, i)
		}
	}
	if refuser >= 0 {
		// Refused: nothing is taken, so no rule's state is known.
		for i := range res.Policies {
			res.Policies[i].Unknown = true
		}
		return res
	}
	if len(takes) > 0 {
		l.enforce(r, now, &res, applied, takes, out, idx)
	}
	for i, ru := range applied {
		if ru.shadow && !res.Policies[i].Unknown {
			l.observe(r, now, &res, ru, &res.Policies[i])
		}
	}
	if res.Status == http.StatusTooManyRequests && res.Reason == ReasonExceeded {
		res.RetryAfter = l.retryAfter(&res)
	}
	return res
}

// refused records that rule ru (policy p, the i-th applied) refuses the
// request's cost (cost_out_of_range "reject"). The first enforce rule to
// refuse decides the request: 400, nothing taken. A shadow rule only reports
// that it would have refused, and takes nothing.
func (l *Limiter) refused(res *Result, ru *rule, p *Policy, why string, refuser *int, i int) {
	p.Denied, p.Unknown = true, true
	if ru.shadow {
		ru.counters.shadowDenied.Add(1)
		if res.Reason == "" {
			res.DeniedBy, res.Reason = ru.Name, ReasonShadowPrefix+ReasonInvalidCost
		}
		return
	}
	ru.counters.refused.Add(1)
	if *refuser >= 0 {
		return
	}
	*refuser = i
	res.Allowed, res.Status, res.Reason, res.DeniedBy = false, http.StatusBadRequest, ReasonInvalidCost, ru.Name
	res.denier, res.Detail = ru, why
}

// enforce makes the all-or-nothing take of the enforce rules.
func (l *Limiter) enforce(r *http.Request, now time.Time, res *Result, applied []*rule, takes []Take, out []engine.Decision, idx []int) {
	denied, err := l.opts.store.TakeAll(r.Context(), now, takes, out)
	if err != nil {
		if l.opts.onStoreError != nil {
			l.opts.onStoreError(err)
		}
		closed := false
		for _, i := range idx {
			res.Policies[i].Unknown = true
			closed = closed || applied[i].closed
		}
		for _, i := range idx {
			if closed {
				applied[i].counters.failedClosed.Add(1)
			} else {
				applied[i].counters.failedOpen.Add(1)
			}
		}
		if closed {
			res.Allowed, res.Status, res.Reason, res.RetryAfter = false, http.StatusServiceUnavailable, ReasonStoreUnavailable, 1
		}
		return
	}
	for j, i := range idx {
		res.Policies[i].set(out[j], applied[i].Rate)
	}
	if denied < 0 {
		for _, i := range idx {
			applied[i].counters.allowed.Add(1)
		}
		return
	}
	k := idx[denied]
	res.denier = applied[k]
	res.Policies[k].Denied = true
	applied[k].counters.denied.Add(1)
	res.Allowed, res.Status, res.DeniedBy = false, http.StatusTooManyRequests, applied[k].Name
	res.Reason = ReasonExceeded
	if out[denied].RetryAfter == engine.InfDuration {
		res.Reason = ReasonCostExceedsBurst
	}
}

// observe takes a shadow rule's tokens on its own (or only peeks, when the
// request was denied and so takes nothing) and records what it would do.
func (l *Limiter) observe(r *http.Request, now time.Time, res *Result, ru *rule, p *Policy) {
	n := p.Cost
	if !res.Allowed {
		n = 0
	}
	var out [1]engine.Decision
	denied, err := l.opts.store.TakeAll(r.Context(), now, []Take{{Handle: ru.handle, Key: p.Key, N: n}}, out[:])
	if err != nil {
		if l.opts.onStoreError != nil {
			l.opts.onStoreError(err)
		}
		p.Unknown = true
		ru.counters.failedOpen.Add(1)
		return
	}
	p.set(out[0], ru.Rate)
	if n == 0 {
		return
	}
	if denied < 0 {
		ru.counters.allowed.Add(1)
		return
	}
	p.Denied = true
	ru.counters.shadowDenied.Add(1)
	if res.Reason == "" {
		res.DeniedBy = ru.Name
		res.Reason = ReasonShadowPrefix + ReasonExceeded
		if out[0].RetryAfter == engine.InfDuration {
			res.Reason = ReasonShadowPrefix + ReasonCostExceedsBurst
		}
	}
}

// set fills the state fields from a decision of a rule refilling at rate.
func (p *Policy) set(d engine.Decision, rate float64) {
	p.Remaining = d.Remaining
	p.Full = ceilSeconds(d.ResetAfter)
	switch {
	case d.RetryAfter == engine.InfDuration:
		p.Reset = -1
	case !d.Allowed:
		p.Reset = ceilSeconds(d.RetryAfter)
	default:
		// Allowed: the wait until the same cost could pass again, from the
		// tokens left, in thousandths as the engine counts them.
		p.Reset = 0
		if missing := math.Round(p.Cost*1000) - math.Round(d.Remaining*1000); missing > 0 {
			// 1e-9 s absorbs the float error of an exact quotient.
			p.Reset = int64(math.Ceil(missing/1000/rate - 1e-9))
		}
	}
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
