package httplimit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
)

// maxCheckBytes bounds a check request's body.
const maxCheckBytes = 64 << 10

// CheckRequest is the body of a check API request: the parts of an HTTP
// request that rules read, described by the service that received it.
//
// Keys keep their bytes: a body that is not UTF-8, or holds a \u escape of
// half a surrogate pair, is refused (encoding/json would decode either to
// U+FFFD, and distinct keys would share a bucket), and so are two header
// names that differ only in case (which value counts would be chance).
type CheckRequest struct {
	// IP is the client's address. Trusted proxies do not apply: the caller
	// is the authority on its client. Empty: the ip:address key is "".
	IP     string `json:"ip"`
	Method string `json:"method"`
	// Path is the request's path as the client sent it, percent-escapes
	// and all, without the query; empty means "/". Rules see its canonical
	// form (CanonicalPath); one that has none is a 400.
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Query   map[string]string `json:"query"`
	// Cost, if set, is the cost under every rule, instead of their
	// cost_source: at least 0.001, and bounded by each rule's min_cost and
	// max_cost as a client's cost is (clamped or refused).
	Cost *float64 `json:"cost"`
}

// CheckResponse is the body of a check API response: the Result, and the
// header fields the service should copy to its response. Policies has every
// rule that applied; Headers leaves shadow rules out, as Handler does,
// unless Options.Headers has HeadersShadow.
type CheckResponse struct {
	Result
	Headers map[string]string `json:"headers"`
}

// CheckHandler serves the check API, for services that cannot embed
// Handler: POST a CheckRequest as JSON, get a CheckResponse (status 200; the
// decision is in the body). Tokens are taken as for a real request. A bad
// request gets a 400 with problem details naming the field.
func (l *Middleware) CheckHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeBadRequest(w, http.StatusMethodNotAllowed, "use POST with a JSON body")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCheckBytes))
		if err != nil {
			writeBadRequest(w, http.StatusBadRequest, fmt.Sprintf("body unreadable or above %d bytes", maxCheckBytes))
			return
		}
		if at := jsonTextFault(body); at >= 0 {
			writeBadRequest(w, http.StatusBadRequest, fmt.Sprintf("body must be UTF-8 JSON without lone surrogate escapes (offset %d): decoded, distinct keys would become one", at))
			return
		}
		var in CheckRequest
		d := json.NewDecoder(bytes.NewReader(body))
		d.DisallowUnknownFields()
		if err := d.Decode(&in); err != nil || d.More() {
			writeBadRequest(w, http.StatusBadRequest, fmt.Sprintf("body must be one JSON object with ip, method, path, headers, query, cost: %v", err))
			return
		}
		req, override, msg := in.request(r, l.opts.paths)
		if msg != "" {
			writeBadRequest(w, http.StatusBadRequest, msg)
			return
		}
		// request made its path canonical already.
		res := l.check(req, override, true)
		h := http.Header{}
		res.WriteHeaders(h)
		out := CheckResponse{Result: res, Headers: map[string]string{}}
		for k := range h {
			// http.Header canonicalises RateLimit to Ratelimit; show the
			// fields as their specifications spell them.
			out.Headers[strings.Replace(k, "Ratelimit", "RateLimit", 1)] = h.Get(k)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(out)
	})
}

// request builds the http.Request the rules see.
func (in *CheckRequest) request(outer *http.Request, paths PathOptions) (*http.Request, float64, string) {
	override := -1.0
	if in.Cost != nil {
		// A cost of 0 would pass free: the smallest cost is a quantum.
		if c := *in.Cost; !(c >= minCost) || math.IsInf(c, 1) {
			return nil, 0, fmt.Sprintf("cost must be a number of at least 0.001 (the smallest cost), got %v", c)
		}
		override = *in.Cost
	}
	if in.IP != "" {
		if _, err := netip.ParseAddr(in.IP); err != nil {
			return nil, 0, "ip must be an IPv4 or IPv6 address, got " + strconv.Quote(in.IP)
		}
	}
	if in.Method == "" {
		in.Method = http.MethodGet
	}
	if i := strings.IndexAny(in.Path, "?#"); i >= 0 {
		// A request target passed whole: its query would be read as part
		// of the path, and match no rule on that path.
		return nil, 0, "path: " + strconv.Quote(in.Path) + " holds a " + strconv.Quote(in.Path[i:i+1]) + ": send the path alone, the query parameters in \"query\" (a \"?\" or \"#\" of the path itself is written %3F or %23)"
	}
	path, err := CanonicalPath(in.Path, paths)
	if err != nil {
		return nil, 0, "path: " + strconv.Quote(in.Path) + " " + err.(*PathError).Problem + ", so it has no canonical form"
	}
	q := url.Values{}
	for k, v := range in.Query {
		q.Set(k, v)
	}
	h := http.Header{}
	seen := make(map[string]string, len(in.Headers))
	for k, v := range in.Headers {
		if !isToken(k) {
			return nil, 0, "headers: " + strconv.Quote(k) + " is not a header name (an HTTP token)"
		}
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if other, dup := seen[ck]; dup {
			// Header names are case-insensitive: which value counts would
			// depend on map order.
			a, b := min(k, other), max(k, other)
			return nil, 0, "headers: " + strconv.Quote(a) + " and " + strconv.Quote(b) + " name the same header (names are case-insensitive)"
		}
		seen[ck] = k
		h[ck] = []string{v}
	}
	r := (&http.Request{
		Method:     in.Method,
		URL:        &url.URL{Path: decodePath(path), RawPath: path, RawQuery: q.Encode()},
		Header:     h,
		RemoteAddr: in.IP,
	}).WithContext(outer.Context())
	return r, override, ""
}

func writeBadRequest(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
