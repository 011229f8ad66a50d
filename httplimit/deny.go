package httplimit

import (
	"net/netip"
	"time"
)

// Denial describes one request a rule's bucket denied, or, with Shadow, one
// a shadow rule would have denied; Options.OnDeny receives it.
//
// Its strings are the request's own (header values, the path) or the bucket
// key already composed for the decision: nothing is copied for it.
type Denial struct {
	// Rule names the rule that denied.
	Rule string
	// Limit names the limit that denied, for a rule with several; empty
	// otherwise.
	Limit string
	// Shadow reports that the rule is in shadow mode: it would have denied,
	// and the request was allowed (unless an enforce rule denied it too, which
	// is then reported on its own).
	Shadow bool
	// Reason is ReasonExceeded or ReasonCostExceedsBurst.
	Reason string
	// Key is the request's bucket key under the rule.
	Key string
	// ClientIP is the client's address (see Client address in the package
	// documentation), whole, not cut to the prefix that keys it; the zero
	// Addr if RemoteAddr did not parse.
	ClientIP netip.Addr
	// Identity is the request's value for the first of the rule's limit keys
	// that names a client rather than a place: a jwt:<claim>, else a
	// header:<name>, else a query:<name>; empty when the rule has none.
	Identity string
	// Method is the request's, Path its path in canonical form, decoded:
	// what the rules read.
	Method, Path string
	// Time is when the decision was made (Options.Now).
	Time time.Time
	// Cost is the request's cost under the rule, and Remaining the tokens
	// its bucket held at the decision (a denial takes none).
	Cost, Remaining float64
}

// denied reports a denial by rule ru (policy p) of the request q to
// Options.OnDeny, if set.
func (l *Middleware) denied(q *request, now time.Time, ru *rule, p *Policy, reason string) {
	// With OnDeny or without, so that setting it costs no allocation.
	q.keep()
	if l.opts.onDeny == nil {
		return
	}
	d := Denial{Rule: ru.ruleName(), Shadow: ru.shadow, Reason: reason, Key: p.Key, Method: q.r.Method, Path: q.r.URL.Path,
		Time: now, Cost: p.Cost, Remaining: p.Remaining}
	if ru.limitOf != "" {
		d.Limit = ru.Name
	}
	if q.direct {
		d.ClientIP, _ = parseHost(q.r.RemoteAddr)
	} else {
		d.ClientIP, _ = q.o.clientIP(q.r)
	}
	if k, ok := identityKey(ru.keys); ok {
		d.Identity, _ = q.value(k)
	}
	l.opts.onDeny(d)
}

// identityKey is the limit key whose value is a Denial's Identity.
func identityKey(keys []keySpec) (keySpec, bool) {
	for _, kind := range [...]keyKind{kindJWT, kindHeader, kindQuery} {
		for _, k := range keys {
			if k.kind == kind {
				return k, true
			}
		}
	}
	return keySpec{}, false
}
