package httplimit

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// maxTakes is how many rules one request can meet without allocating for
// the takes.
const maxTakes = 8

// Result is the decision on one request.
type Result struct {
	// Allowed reports whether the request may proceed.
	Allowed bool `json:"allowed"`
	// Status is 200 when allowed, 429 when a rule denied, 400 when a rule
	// refused the cost the client sent (malformed, or out of range with
	// cost_out_of_range "reject"), could not read one value of a header or
	// query parameter (ReasonAmbiguousValue) or the path has no canonical
	// form (ReasonInvalidPath), 503 when
	// the store failed and a rule that applied has fail_mode "closed".
	Status int `json:"status"`
	// Reason is empty, or one of the Reason constants (with the shadow
	// prefix when a shadow rule would have denied an allowed request).
	Reason string `json:"reason,omitempty"`
	// DeniedBy names the rule that denied (or, for a shadow reason, would
	// have): for a rule with several limits, the limit that denied, or
	// the rule itself when it refused the request (400).
	DeniedBy string `json:"denied_by,omitempty"`
	// Detail says why the request was refused (Status 400): the source and
	// the bound it broke, the header or parameter without one value, or
	// what is wrong with the path.
	Detail string `json:"detail,omitempty"`
	// RetryAfter is the Retry-After value in seconds, jitter included; 0
	// when the response carries none.
	RetryAfter int64 `json:"retry_after,omitempty"`
	// Policies has one entry per rule that applied (per limit, for a rule
	// with several), in rule order.
	Policies []Policy `json:"policies"`
	// StoreError reports that the shared store could not decide the
	// request (failed, too slow, or its breaker open): each rule's
	// fail_mode answered, and Policies say how.
	StoreError bool `json:"store_error,omitempty"`
	// Delay is how long the request must wait before it proceeds: its
	// tokens are reserved for then (delay mode). Handler and Admit wait it
	// out; a caller of Check must wait it itself. 0 for a request that need
	// not wait.
	Delay time.Duration `json:"-"`
	// DelayMS is Delay in whole milliseconds, rounded up: the check API's
	// delay_ms. Set by Check only.
	DelayMS int64 `json:"delay_ms,omitempty"`
	// Headers is the header fields WriteHeaders writes: the Middleware's
	// Options.Headers; 0 (as in a Result built or decoded by a caller)
	// means HeadersDraft.
	Headers HeaderSet `json:"-"`
}

// Policy is one applied rule's state after the decision: one per limit
// of a rule with several.
type Policy struct {
	// Name is the rule's, or the limit's for a rule with several: the
	// RateLimit item's name.
	Name string `json:"name"`
	// Rule is the name of the rule a limit belongs to; empty for a rule
	// with one limit.
	Rule string `json:"rule,omitempty"`
	// Period is a calendar quota's period ("month"); empty for a token
	// bucket. A quota's Burst and Quota are its tokens per period, Rate
	// their average over the period's nominal length, Window that length
	// in seconds, and FullIn the seconds until the period renews.
	Period string `json:"period,omitempty"`
	// Shape is the limit's shape: "" for a token bucket, ShapeCalendarQuota
	// or ShapeStrictWindow. A strict window's Burst and Quota are its
	// limit, Window its span in seconds, Rate the limit over the span,
	// and FullIn the seconds until all it counts has left it.
	Shape string `json:"shape,omitempty"`
	// Mode is "enforce" or "shadow".
	Mode string `json:"mode"`
	// Key is the request's bucket key under the rule.
	Key string `json:"key"`
	// Quota and Window are RateLimit-Policy's q (the burst, rounded down)
	// and w (seconds to refill an empty bucket, rounded up).
	Quota  int64 `json:"quota"`
	Window int64 `json:"window"`
	// Rate and Burst are the rule's limit: tokens per second and the
	// bucket's capacity.
	Rate  float64 `json:"rate"`
	Burst float64 `json:"burst"`
	// Cost is the request's cost under the rule.
	Cost float64 `json:"cost"`
	// Remaining is the tokens the bucket holds after the decision.
	Remaining float64 `json:"remaining"`
	// RetryIn is RateLimit's t: whole seconds until a request of the same
	// cost could pass (0 if it could now), or -1 if it never can.
	RetryIn int64 `json:"retry_in"`
	// FullIn is whole seconds until the bucket is full: what the legacy
	// RateLimit-Reset fields carry.
	FullIn int64 `json:"full_in"`
	// Denied reports that this rule denied the request (in shadow mode:
	// would have).
	Denied bool `json:"denied"`
	// Unknown reports that the bucket's state is not known, because the
	// store failed or the request was refused before any take: the other
	// state fields are 0.
	Unknown bool `json:"unknown,omitempty"`
	// Fallback reports that the store failed and its in-memory fallback
	// decided for this rule (fail_mode "fallback"): the state fields are
	// the fallback bucket's.
	Fallback bool `json:"fallback,omitempty"`

	// policy and quoted are the rule's RateLimit-Policy item and quoted
	// name, precomputed so that writing headers allocates less; empty in a
	// Policy built or decoded by a caller, and then computed.
	policy, quoted string
	// denial is the rule's precomputed problem body of a 429; nil in a
	// Policy built or decoded by a caller, whose problem is then built.
	denial *denialBody
}

// Check decides on r under the rules in force, takes the tokens of an
// admitted request, and returns the decision; it writes nothing. Handler is
// Check plus the response, and the wait and the slots below. Under a rule
// in delay mode, an admitted request may have to wait (Result.Delay): its
// tokens are reserved for then, and the caller must wait that long before
// it proceeds. An in-flight limit is only checked: a slot must be free,
// and none is held, since Check cannot know when the request ends (Admit
// holds them). Rules see r's path in its canonical form
// (CanonicalPath under Options.Paths); a path that has none is refused with
// 400 and ReasonInvalidPath, and takes no token.
func (l *Middleware) Check(r *http.Request) Result {
	r, res, ok := l.canonical(r)
	if !ok {
		return res
	}
	return l.check(r, -1, false)
}

// check is Check on a request whose path is canonical, with an optional
// cost for every rule (override >= 0); with direct, RemoteAddr is the
// client whatever the trusted proxies. The Result is the caller's own.
func (l *Middleware) check(r *http.Request, override float64, direct bool) Result {
	sc := getScratch()
	defer putScratch(sc)
	res := l.decide(r, sc, override, direct, false, false)
	res.Policies = append(make([]Policy, 0, len(res.Policies)), res.Policies...)
	res.DelayMS = int64((res.Delay + time.Millisecond - 1) / time.Millisecond)
	return res
}

// canonical returns r with the canonical form of its path (r itself when
// it has it already, else a copy), or the Result refusing it.
func (l *Middleware) canonical(r *http.Request) (*http.Request, Result, bool) {
	if u := r.URL; u.RawPath == "" && u.Opaque == "" && decodedCanonical(u.Path, l.opts.paths) {
		return r, Result{}, true
	}
	raw := rawPath(r.URL)
	c, err := CanonicalPath(raw, l.opts.paths)
	if err != nil {
		l.opts.invalidPaths.Add(1)
		var pe *PathError
		errors.As(err, &pe)
		return nil, Result{Status: http.StatusBadRequest, Reason: ReasonInvalidPath, Detail: pe.Problem,
			Policies: []Policy{}, Headers: l.opts.headers}, false
	}
	if c == raw && r.URL.Opaque == "" {
		// Then Path is raw decoded: what the rules are to see.
		return r, Result{}, true
	}
	// As http.StripPrefix does: the caller's request stays as it was.
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Opaque = ""
	r2.URL.Path, r2.URL.RawPath = decodePath(c), c
	return r2, Result{}, true
}

// rawPath is u's path as the client spelled it. EscapedPath is not: when
// RawPath holds a byte url would have escaped (| { ^ " non-ASCII...), it
// escapes Path instead, where %2F and %5C are decoded already.
// An opaque target (GET http:x) is its own spelling, and has no canonical
// form unless it starts with "/".
func rawPath(u *url.URL) string {
	if u.Opaque != "" {
		return u.Opaque
	}
	if u.RawPath != "" && decodesTo(u.RawPath, u.Path) {
		return u.RawPath
	}
	return u.EscapedPath()
}

// decodesTo reports whether percent-decoding raw gives p, without
// allocating.
func decodesTo(raw, p string) bool {
	j := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			if i+2 >= len(raw) {
				return false
			}
			h, ok1 := unhex(raw[i+1])
			l, ok2 := unhex(raw[i+2])
			if !ok1 || !ok2 {
				return false
			}
			c = h<<4 | l
			i += 2
		}
		if j >= len(p) || p[j] != c {
			return false
		}
		j++
	}
	return j == len(p)
}

// decide is check in sc's memory: the Result's Policies are sc's (unless
// more than maxTakes rules apply), valid until sc is put back. With borrow,
// and Limiters that keep no key they are given (ruleSet.borrow), so are the
// bytes of the keys it composes. With hold, the caller waits out the
// Result's Delay (sc.waiter) and holds the in-flight slots (sc.slots)
// until the request is finished; without, Delay is the caller's to wait,
// and in-flight limits are only checked.
func (l *Middleware) decide(r *http.Request, sc *scratch, override float64, direct, borrow, hold bool) Result {
	set := l.set.Load()
	q := request{r: r, o: l.opts, sc: sc, direct: direct, borrow: borrow && set.borrow}
	var appliedBuf [maxTakes]*rule
	// unclear[i] is why the i-th applied rule could not read the one value
	// of a header or parameter its match reads: it refuses the request.
	var unclearBuf [maxTakes]string
	applied, unclear := appliedBuf[:0], unclearBuf[:0]
	for _, g := range set.groups {
		for _, ru := range g {
			ok := ru.matches(&q)
			why := q.takeBad()
			if ok || why != "" {
				for _, part := range ru.parts {
					applied, unclear = append(applied, part), append(unclear, why)
				}
				break
			}
		}
	}
	policies := sc.policies[:]
	if len(applied) > maxTakes {
		policies = make([]Policy, len(applied))
	}
	res := Result{Allowed: true, Status: http.StatusOK, Headers: l.opts.headers, Policies: policies[:len(applied)]}
	if len(applied) == 0 {
		return res
	}
	now := l.opts.now()
	var idxBuf [maxTakes]int
	takes, out, idx := sc.takes[:0], sc.out[:], idxBuf[:0]
	if len(applied) > maxTakes {
		out = make([]engine.Decision, len(applied))
	}
	refuser := -1 // the first enforce rule that refuses the request's cost
	var why, reason string
	var slotBuf [maxTakes]int
	slotIdx := slotBuf[:0] // the enforce in-flight limits that apply
	mayWait := false       // an enforce token bucket is in delay mode
	for i, ru := range applied {
		p := &res.Policies[i]
		// Assigned whole: the policy is the scratch's, not a new one.
		*p = Policy{Name: ru.Name, Rule: ru.limitOf, Period: ru.period, Shape: ru.shape(), Mode: ru.Mode, Rate: ru.Rate, Burst: ru.Burst, policy: ru.policy,
			quoted: ru.quoted, denial: ru.denial, Quota: quota(ru.Burst), Window: ru.window()}
		if ru.adapt != nil {
			p.Rate = ru.adapt.c.Rate()
			p.Window = window(p.Rate, ru.Burst)
			if !ru.shadow && sc.nobs < len(sc.observers) {
				sc.observers[sc.nobs] = ru.adapt
				sc.nobs++
			}
		}
		if ru.head != ru {
			// The rule's later limits share its key, cost and verdict.
			prev := &res.Policies[i-1]
			p.Key, p.Cost = prev.Key, prev.Cost
		} else if why, reason = unclear[i], ReasonAmbiguousValue; why == "" {
			p.Key = q.key(ru.keys)
			if override < 0 {
				p.Cost, why = ru.cost.cost(&q)
			} else {
				p.Cost, why = ru.cost.bound(override, false)
			}
			reason = ReasonInvalidCost
			if bad := q.takeBad(); bad != "" {
				why, reason = bad, ReasonAmbiguousValue
			}
		}
		if why != "" {
			l.refused(&res, ru, p, reason, why, &refuser, i)
			continue
		}
		switch {
		case ru.shadow:
		case ru.inflight != nil:
			slotIdx = append(slotIdx, i)
		default:
			takes = append(takes, engine.Take{Limiter: ru.lim, Key: p.Key, N: p.Cost, Calendar: calendarFor(&q, ru, i)})
			idx = append(idx, i)
			mayWait = mayWait || ru.wait > 0
		}
	}
	if refuser >= 0 {
		// Refused: nothing is taken, so no rule's state is known.
		for i := range res.Policies {
			res.Policies[i].Unknown = true
		}
		return res
	}
	if len(slotIdx) > 0 && !l.acquireSlots(&q, now, &res, applied, slotIdx, hold) {
		return res
	}
	switch {
	case len(takes) > 0 && mayWait:
		l.reserve(&q, now, &res, applied, takes, out, idx, hold)
	case len(takes) > 0:
		l.enforce(&q, now, &res, applied, takes, out, idx)
	}
	if len(slotIdx) > 0 {
		l.settleSlots(&q, &res, applied, slotIdx)
	}
	for i, ru := range applied {
		if ru.shadow && ru.head == ru && !res.Policies[i].Unknown {
			n := len(ru.parts)
			l.observe(&q, now, &res, applied[i:i+n], res.Policies[i:i+n], hold)
		}
	}
	if res.Status == http.StatusTooManyRequests && (res.Reason == ReasonExceeded || res.Reason == ReasonQuotaExceeded ||
		res.Reason == ReasonWindowExceeded) {
		res.RetryAfter = res.JitteredRetryAfter(l.opts.seed)
	}
	return res
}

// refused records that rule ru (policy p, the i-th applied) refuses the
// request, for reason (ReasonInvalidCost, ReasonAmbiguousValue) and why.
// The first enforce rule to refuse decides the request: 400, nothing taken.
// A shadow rule only reports that it would have refused, and takes nothing.
func (l *Middleware) refused(res *Result, ru *rule, p *Policy, reason, why string, refuser *int, i int) {
	p.Denied, p.Unknown = true, true
	if ru.shadow {
		ru.counters.shadowDenied.Add(1)
		if res.Reason == "" {
			res.DeniedBy, res.Reason = ru.ruleName(), ReasonShadowPrefix+reason
		}
		return
	}
	ru.counters.refused.Add(1)
	if *refuser >= 0 {
		return
	}
	*refuser = i
	// The rule refuses, not one of its limits.
	res.Allowed, res.Status, res.Reason, res.DeniedBy = false, http.StatusBadRequest, reason, ru.ruleName()
	res.Detail = why
}

// enforce makes the all-or-nothing take of the enforce rules.
func (l *Middleware) enforce(q *request, now time.Time, res *Result, applied []*rule, takes []engine.Take, out []engine.Decision, idx []int) {
	denied, err := takeAll(q.r.Context(), now, takes, out)
	if err != nil && l.opts.onStoreError != nil {
		l.opts.onStoreError(err)
	}
	fellBack := false
	if err != nil {
		var ok bool
		if takes, out, idx, denied, fellBack, ok = l.failed(q, now, res, applied, takes, out, idx, denied, err); !ok {
			return
		}
	}
	for j, i := range idx {
		res.Policies[i].set(out[j], res.Policies[i].Rate)
		res.Policies[i].Fallback = fellBack
	}
	if denied < 0 {
		for _, i := range idx {
			applied[i].counters.allow(&res.Policies[i])
			if fellBack {
				applied[i].counters.fellBack.Add(1)
			}
		}
		return
	}
	if fellBack {
		applied[idx[denied]].counters.fellBack.Add(1)
	}
	l.deny(q, now, res, applied, out, idx, denied)
}

// deny records that the take at denied (of the rule at idx[denied])
// denied the request: 429, for the reason its shape gives.
func (l *Middleware) deny(q *request, now time.Time, res *Result, applied []*rule, out []engine.Decision, idx []int, denied int) {
	k := idx[denied]
	res.Policies[k].Denied = true
	applied[k].counters.denied.Add(1)
	res.Allowed, res.Status, res.DeniedBy = false, http.StatusTooManyRequests, applied[k].Name
	res.Reason = applied[k].exceeded()
	if out[denied].RetryAfter == engine.InfDuration {
		res.Reason = ReasonCostExceedsBurst
	}
	l.denied(q, now, applied[k], &res.Policies[k], res.Reason)
}

// observe takes a shadow rule's tokens on its own, from all of its limits
// (parts, with their policies ps) or none, or only peeks when the request
// was denied and so takes nothing, and records what it would do.
func (l *Middleware) observe(q *request, now time.Time, res *Result, parts []*rule, ps []Policy, hold bool) {
	n := ps[0].Cost
	if !res.Allowed {
		n = 0
	}
	if parts, ps = l.observeSlots(q, now, res, parts, ps, hold); len(parts) == 0 {
		return
	}
	take, out := q.sc.shadowTake[:len(parts)], q.sc.shadowOut[:len(parts)]
	for j, ru := range parts {
		take[j] = engine.Take{Limiter: ru.lim, Key: ps[j].Key, N: n, Calendar: calendarFor(q, ru, maxTakes+j)}
	}
	denied, err := takeAll(q.r.Context(), now, take, out)
	if err != nil && l.opts.onStoreError != nil {
		l.opts.onStoreError(err)
	}
	if err != nil {
		res.StoreError = true
	}
	if err != nil && !errors.Is(err, engine.ErrFallback) {
		for j, ru := range parts {
			ps[j].Unknown = true
			ru.counters.failedOpen.Add(1)
		}
		return
	}
	for j := range parts {
		ps[j].set(out[j], ps[j].Rate)
		ps[j].Fallback = err != nil
	}
	if n == 0 {
		return
	}
	if denied < 0 {
		for j, ru := range parts {
			ru.counters.allow(&ps[j])
		}
		return
	}
	ru, p := parts[denied], &ps[denied]
	p.Denied = true
	ru.counters.shadowDenied.Add(1)
	reason := ru.exceeded()
	if out[denied].RetryAfter == engine.InfDuration {
		reason = ReasonCostExceedsBurst
	}
	if res.Reason == "" {
		res.DeniedBy = ru.Name
		res.Reason = ReasonShadowPrefix + reason
	}
	l.denied(q, now, ru, p, reason)
}

// NewPolicy returns the Policy of a limit named name refilling rate tokens
// a second into a bucket of burst, in mode (ModeEnforce or ModeShadow),
// after decision d on a request of cost under key; Denied is left to the
// caller. With Result.WriteHeaders it gives the RateLimit fields of a
// decision made outside a Middleware.
func NewPolicy(name, mode, key string, rate, burst, cost float64, d engine.Decision) Policy {
	p := Policy{Name: name, Mode: mode, Key: key, Rate: rate, Burst: burst, Cost: cost,
		Quota: quota(burst), Window: window(rate, burst)}
	p.set(d, rate)
	return p
}

// set fills the state fields from a decision of a rule refilling at rate
// (or of a quota: Period set).
func (p *Policy) set(d engine.Decision, rate float64) {
	p.Remaining = d.Remaining
	p.FullIn = ceilSeconds(d.ResetAfter)
	switch {
	case d.RetryAfter == engine.InfDuration:
		p.RetryIn = -1
	case !d.Allowed:
		p.RetryIn = ceilSeconds(d.RetryAfter)
	case p.Shape != "":
		// Allowed: the same cost passes again now, or (bounded from
		// above) when the quota renews or the window empties.
		p.RetryIn = 0
		if p.Cost > d.Remaining {
			p.RetryIn = p.FullIn
		}
	default:
		p.RetryIn = 0
		// Allowed: the wait until the same cost could pass again, from the
		// tokens left, counted in the engine's quanta (Remaining is a whole
		// number of them).
		cost, _ := fixedpoint.Quantize(p.Cost)
		have, _ := fixedpoint.Quantize(d.Remaining)
		if cost > have {
			// 1e-9 s absorbs the float error of an exact quotient.
			p.RetryIn = int64(math.Ceil(float64(cost-have)/fixedpoint.QuantaPerToken/rate - 1e-9))
		}
	}
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// takeAll makes takes, all on one store, at now if their Limiters take the
// time from the caller (engine.TakerAt), else at the store's own time.
func takeAll(ctx context.Context, now time.Time, takes []engine.Take, out []engine.Decision) (int, error) {
	if at, ok := takes[0].Limiter.(engine.TakerAt); ok {
		return at.TakeAllAt(now, takes, out)
	}
	return takes[0].Limiter.TakeAll(ctx, takes, out)
}

// quota is RateLimit-Policy's q of a burst: whole tokens.
func quota(burst float64) int64 { return int64(math.Floor(burst)) }

// window is RateLimit-Policy's w: whole seconds to refill an empty bucket.
func window(rate, burst float64) int64 { return int64(math.Ceil(burst / rate)) }

// exceeded is the reason of a denial by r's bucket or quota.
func (r *rule) exceeded() string {
	switch r.shape() {
	case ShapeConcurrency:
		return ReasonInFlightExceeded
	case ShapeCalendarQuota:
		return ReasonQuotaExceeded
	case ShapeStrictWindow:
		return ReasonWindowExceeded
	}
	return ReasonExceeded
}

// calendarFor is the calendar of q's key under quota r, or nil for r's
// own (and for a token bucket): in the scratch's slot i when it has one.
func calendarFor(q *request, r *rule, i int) *engine.Calendar {
	if r.period == "" || !r.anchorFrom.any {
		return nil
	}
	var c *engine.Calendar
	if i < len(q.sc.calendars) {
		c = &q.sc.calendars[i]
	} else {
		c = new(engine.Calendar)
	}
	if !r.anchorFrom.calendar(q, r.cal, c) {
		return nil
	}
	return c
}
