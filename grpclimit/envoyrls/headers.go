package envoyrls

import (
	"net/http"
	"slices"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

// headers is the RateLimit-Policy and RateLimit fields of a decision and,
// on a denial, the reason and Retry-After (with the jitter httplimit gives
// it), written as httplimit writes them for an HTTP rule. A limit of 0
// requests, which never admits, has no policy to advertise. A denial that
// can never pass (such a limit, or a cost above a burst) carries no
// Retry-After, and the reason says so. A calendar quota is written as
// httplimit writes one: w its period's nominal length, t its renewal when
// the cost is not left, and quota_exceeded the reason of its denial.
func (s *Server) headers(checks []check, denied bool) []*core.HeaderValue {
	res := httplimit.Result{Allowed: !denied}
	if s.opts.ShadowHeaders {
		res.Headers = httplimit.HeadersDraft | httplimit.HeadersShadow
	}
	never, quotaDenied := false, false
	for i := range checks {
		c := &checks[i]
		if c.over && !c.shadow && !c.quota && c.d.RetryAfter == engine.InfDuration {
			never = true
		}
		if c.kind != kindBucket {
			continue
		}
		mode := httplimit.ModeEnforce
		if c.shadow {
			mode = httplimit.ModeShadow
		}
		p := httplimit.NewPolicy(c.name(), mode, c.key, float64(rate(c.perUnit, c.unit, c.mult)), float64(c.perUnit), c.cost, c.d)
		if c.cal != nil {
			quotaPolicy(&p, c)
		}
		p.Denied = c.over
		if c.over && !c.shadow && res.DeniedBy == "" {
			res.DeniedBy = p.Name
			quotaDenied = c.cal != nil
		}
		res.Policies = append(res.Policies, p)
	}
	switch {
	case !denied:
	case never:
		res.Reason = httplimit.ReasonCostExceedsBurst
	case quotaDenied:
		res.Reason = httplimit.ReasonQuotaExceeded
		res.RetryAfter = res.JitteredRetryAfter(s.opts.Seed)
	default:
		res.Reason = httplimit.ReasonExceeded
		res.RetryAfter = res.JitteredRetryAfter(s.opts.Seed)
	}
	h := http.Header{}
	res.WriteHeaders(h)
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]*core.HeaderValue, 0, len(names))
	for _, name := range names {
		for _, v := range h[name] {
			out = append(out, &core.HeaderValue{Key: name, Value: v})
		}
	}
	return out
}

// quotaPolicy makes p, built by NewPolicy for c's decision, a calendar
// quota's: its shape and period, w the period's nominal length, and t
// the time until the quota renews when c's cost (a look's, as if 1) is
// not left, for a quota gets nothing back before.
func quotaPolicy(p *httplimit.Policy, c *check) {
	p.Shape, p.Period = httplimit.ShapeCalendarQuota, c.cal.Period.String()
	p.Window = int64(c.cal.Period.Nominal() / time.Second)
	p.FullIn = ceilSeconds(c.d.ResetAfter)
	switch {
	case c.d.RetryAfter == engine.InfDuration:
		p.RetryIn = -1
	case c.over || c.d.Remaining < max(c.cost, 1):
		p.RetryIn = p.FullIn
	default:
		p.RetryIn = 0
	}
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// name is what the RateLimit fields call c's limit: its name in the
// configuration, else its path there, else (a request-carried limit) its
// bucket set's.
func (c *check) name() string {
	switch {
	case c.limit == nil:
		return c.ovName
	case c.limit.Name != "":
		return c.limit.Name
	default:
		return c.limit.Path
	}
}
