package httplimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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
	for _, pol := range res.Policies {
		if pol.Name == res.DeniedBy && pol.Mode == ModeEnforce {
			denier = pol
		}
	}
	p := &Problem{Type: QuotaExceededType, Title: "Too Many Requests", Status: res.Status,
		ViolatedPolicies: []string{res.DeniedBy}, Reason: res.Reason}
	limit := fmt.Sprintf("Rule %q allows %s per second with bursts of %s", res.DeniedBy, tokens(denier.Rate), num(denier.Burst))
	if res.Reason == ReasonCostExceedsBurst {
		p.Detail = fmt.Sprintf("%s; this request costs %s, more than a burst, so it can never be admitted.", limit, num(denier.Cost))
	} else {
		p.Detail = fmt.Sprintf("%s; retry after %d s.", limit, res.RetryAfter)
	}
	return p
}

// WriteProblem writes the headers and the application/problem+json body of
// a denied result; it does nothing for an allowed one.
func (res *Result) WriteProblem(w http.ResponseWriter) {
	p := res.Problem()
	if p == nil {
		return
	}
	body, _ := json.Marshal(p) // strings and ints only: cannot fail
	h := w.Header()
	res.WriteHeaders(h)
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n'))
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// tokens is x tokens in words: "1 token", "0.5 tokens", "10 tokens".
func tokens(x float64) string {
	if x == 1 {
		return "1 token"
	}
	return num(x) + " tokens"
}
