package httplimit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
)

// QuotaExceededType is the RFC 9457 problem type of a 429, registered by
// draft-ietf-httpapi-ratelimit-headers.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Problem is the RFC 9457 body of a denied request.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// ViolatedPolicies names the denying rule (the draft's member).
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
	// Reason repeats the reason header.
	Reason string `json:"reason,omitempty"`
}

// Problem returns the problem details of a denied result, nil if allowed.
func (res *Result) Problem() *Problem {
	switch {
	case res.Allowed:
		return nil
	case res.Reason == ReasonCancelled:
		return &Problem{Type: "about:blank", Title: http.StatusText(res.Status), Status: res.Status,
			Detail: "The request's wait in line ended before its turn: its client left, or the server is shutting down.", Reason: res.Reason}
	case res.Status == http.StatusServiceUnavailable:
		return &Problem{Type: "about:blank", Title: "Service Unavailable", Status: res.Status,
			Detail: "The rate limiter cannot reach its store, and a rule that applies fails closed.", Reason: res.Reason}
	case res.Reason == ReasonInvalidPath:
		return &Problem{Type: "about:blank", Title: "Bad Request", Status: res.Status,
			Detail: fmt.Sprintf("The request path %s; it has no canonical form, so no rate limit could tell which resource it names.", res.Detail), Reason: res.Reason}
	case res.Status == http.StatusBadRequest:
		return &Problem{Type: "about:blank", Title: "Bad Request", Status: res.Status,
			Detail: fmt.Sprintf("Rule %q refuses this request: %s.", res.DeniedBy, res.Detail), Reason: res.Reason}
	}
	var denier Policy // zero if a caller's Result names no applied rule
	if p := res.denier(); p != nil {
		denier = *p
	}
	p := &Problem{Type: QuotaExceededType, Title: "Too Many Requests", Status: res.Status,
		ViolatedPolicies: []string{res.DeniedBy}, Reason: res.Reason}
	who := fmt.Sprintf("Rule %q", res.DeniedBy)
	if denier.Rule != "" {
		who = fmt.Sprintf("Limit %q of rule %q", res.DeniedBy, denier.Rule)
	}
	limit := fmt.Sprintf("%s allows %s per second with bursts of %s", who, tokens(denier.Rate), num(denier.Burst))
	switch {
	case denier.Period != "":
		limit = fmt.Sprintf("%s allows %s per %s", who, tokens(denier.Burst), denier.Period)
	case denier.Shape == ShapeStrictWindow:
		limit = fmt.Sprintf("%s allows %s in any %d s", who, tokens(denier.Burst), denier.Window)
	case denier.Shape == ShapeConcurrency:
		limit = fmt.Sprintf("%s allows %s in flight at once, and they are", who, requests(denier.Burst))
	}
	switch res.Reason {
	case ReasonDelayFull:
		p.Detail = fmt.Sprintf("%s; this request would have waited its turn, but as many requests as the server lets wait are waiting; retry after %d s.", limit, res.RetryAfter)
	case ReasonCostExceedsBurst:
		p.Detail = fmt.Sprintf("%s; this request costs %s, more than a burst, so it can never be admitted.", limit, num(denier.Cost))
	default:
		p.Detail = fmt.Sprintf("%s; retry after %d s.", limit, res.RetryAfter)
	}
	return p
}

// requests spells n requests.
func requests(n float64) string {
	if n == 1 {
		return "1 request"
	}
	return num(n) + " requests"
}

// WriteProblem writes the headers and the application/problem+json body of
// a denied result; it does nothing for an allowed one.
func (res *Result) WriteProblem(w http.ResponseWriter) {
	res.writeProblem(w, nil)
}

// writeProblem is WriteProblem, with the rate-limit values from vals. The
// ordinary 429 of a rule that Check applied is written from the parts the
// rule precomputed; anything else by writeProblemSlow.
func (res *Result) writeProblem(w http.ResponseWriter, vals *headerValues) {
	d := res.denialBody()
	if d == nil {
		res.writeProblemSlow(w, vals)
		return
	}
	h := w.Header()
	res.writeLimitFields(h, vals)
	bp := bodyPool.Get().(*[]byte)
	b := d.append((*bp)[:0], res.RetryAfter)
	// One string holds both numbers, and one array all five values, so
	// that the fields cost two allocations; each value's slice has no room
	// to append into, so that Header.Add makes a new one.
	var buf [40]byte
	n := strconv.AppendInt(buf[:0], int64(len(b)), 10)
	length := len(n)
	nums := string(strconv.AppendInt(n, res.RetryAfter, 10))
	v := &[5]string{problemType, nums[:length], "no-store", res.Reason, nums[length:]}
	h[hdrType] = v[0:1:1]
	h[hdrLength] = v[1:2:2]
	h[hdrCache] = v[2:3:3]
	h[hdrReason] = v[3:4:4]
	if res.RetryAfter > 0 {
		h[hdrRetryAfter] = v[4:5:5]
	}
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(b) // which keeps nothing of b
	if cap(b) <= maxPooledBody {
		*bp = b
		bodyPool.Put(bp)
	}
}

// writeProblemSlow writes any problem: the document built by Problem,
// encoded by encoding/json. It is what writeProblem's precomputed parts are
// made and tested by.
func (res *Result) writeProblemSlow(w http.ResponseWriter, vals *headerValues) {
	p := res.Problem()
	if p == nil {
		return
	}
	body, _ := json.Marshal(p) // strings and ints only: cannot fail
	h := w.Header()
	res.writeHeaders(h, vals)
	h.Set("Content-Type", problemType)
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n'))
}

// problemType is the media type of a problem document.
const problemType = "application/problem+json"

// bodyPool holds the buffers writeProblem builds a body in; one longer than
// maxPooledBody (a rule with a very long name) is left to the collector.
var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 4 << 10

// denialBody is the body of a rule's ordinary denial (ReasonExceeded, 429)
// with its Retry-After cut out: the document is the same for every denial
// by the rule but for that number, in its detail.
type denialBody struct {
	// name, rule, rate and burst are the limit's, which the parts spell
	// out: a Policy whose fields differ (changed by a caller) is written by
	// writeProblemSlow.
	name, rule  string
	rate, burst float64
	// head is the body up to the number, tail after it, newline included.
	head, tail string
}

// newDenialBody returns the parts of the denial body of a limit (of rule,
// for one of a rule's several; else ""), nil if
// they cannot be made. They are cut from what writeProblemSlow writes,
// and checked against it, so that they encode the name exactly as
// encoding/json does (its escapes of ", \, <, > and & among them).
func newDenialBody(name, rule string, rate, burst float64) *denialBody {
	body := func(retry int64) []byte {
		res := Result{Status: http.StatusTooManyRequests, Reason: ReasonExceeded, DeniedBy: name, RetryAfter: retry,
			Policies: []Policy{{Name: name, Rule: rule, Mode: ModeEnforce, Rate: rate, Burst: burst}}}
		b, _ := json.Marshal(res.Problem())
		return append(b, '\n')
	}
	// 0 and 1 differ in one byte, the number's: the rest is the parts.
	zero, one := body(0), body(1)
	if len(zero) != len(one) {
		return nil
	}
	i := 0
	for i < len(zero) && zero[i] == one[i] {
		i++
	}
	if i == len(zero) {
		return nil
	}
	d := &denialBody{name: name, rule: rule, rate: rate, burst: burst, head: string(zero[:i]), tail: string(zero[i+1:])}
	for _, n := range []int64{0, 1, -7, 1234567890123} {
		if !bytes.Equal(d.append(nil, n), body(n)) {
			return nil
		}
	}
	return d
}

// append appends the body with retry to b.
func (d *denialBody) append(b []byte, retry int64) []byte {
	b = append(b, d.head...)
	b = strconv.AppendInt(b, retry, 10)
	return append(b, d.tail...)
}

// denialBody returns the precomputed parts of res's problem body, nil if
// res is not the ordinary denial they make or has none.
func (res *Result) denialBody() *denialBody {
	if res.Allowed || res.Status != http.StatusTooManyRequests || res.Reason != ReasonExceeded {
		return nil
	}
	denier := res.denier()
	if denier == nil {
		return nil
	}
	d := denier.denial
	if d == nil || d.name != denier.Name || d.rule != denier.Rule || math.Float64bits(d.rate) != math.Float64bits(denier.Rate) ||
		math.Float64bits(d.burst) != math.Float64bits(denier.Burst) {
		return nil
	}
	return d
}

// denier is the enforced policy named by DeniedBy (the last, if a caller
// listed it twice), nil if there is none.
func (res *Result) denier() *Policy {
	var d *Policy
	for i := range res.Policies {
		if p := &res.Policies[i]; p.Name == res.DeniedBy && p.Mode == ModeEnforce {
			d = p
		}
	}
	return d
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// tokens is x tokens in words: "1 token", "0.5 tokens", "10 tokens".
func tokens(x float64) string {
	if x == 1 {
		return "1 token"
	}
	return num(x) + " tokens"
}
