package httplimit

import (
	"net/url"
	"strconv"
	"strings"
)

// A rule that reads a header or a query parameter reads one value, and the
// application behind the limiter must see that same value: if the request
// gives it room to pick another (the last of two lines, one item of a list,
// a spelling only some servers fold into the name), a client can be counted
// under one key and served under another. The readers below hand the rule
// the one value, and record in q.bad why a request has no single value;
// decide then refuses it (400, ReasonAmbiguousValue).

// header returns the request's value of header name (canonical): its one
// line. It records a problem when the request has several lines, a
// comma-separated list (for a field whose syntax has no commas of its own),
// another spelling of the name (X_Api_Key: CGI, WSGI and PHP map both to
// HTTP_X_API_KEY), or names the field in Connection (a proxy drops it, so
// the upstream would never see the value the rule keyed on).
func (q *request) header(name string) (string, bool) {
	if name == "Host" {
		return q.host()
	}
	vals := q.r.Header[name]
	if q.bad == "" {
		q.bad = headerProblem(q.r.Header, name, vals)
	}
	if len(vals) == 0 {
		return "", false
	}
	return vals[0], true
}

func headerProblem(h map[string][]string, name string, vals []string) string {
	switch {
	case len(vals) > 1:
		return "header " + quote(name) + " is sent " + strconv.Itoa(len(vals)) + " times"
	case len(vals) == 1 && !commasInSyntax(name) && strings.IndexByte(vals[0], ',') >= 0:
		return "header " + quote(name) + " holds a comma-separated list"
	case len(vals) == 1 && outerSpace(vals[0]):
		return "header " + quote(name) + " has white space around its value"
	}
	if k, ok := otherHeaderSpelling(h, name); ok {
		return "header " + strconv.Quote(k) + " is another spelling of " + quote(name)
	}
	if len(vals) == 0 {
		return ""
	}
	for _, c := range h["Connection"] {
		for c != "" {
			var tok string
			tok, c, _ = strings.Cut(c, ",")
			if tok = strings.TrimSpace(tok); len(tok) == len(name) && sameName(tok, name) {
				return "header " + quote(name) + " is named in Connection, so a proxy drops it"
			}
		}
	}
	return ""
}

// outerSpace reports whether v begins or ends with a space or tab. Go's
// server keeps white space folded onto the end of a value (a continuation
// line of spaces, obs-fold), where a server reading the forwarded field
// trims it: each amount of it would be another key to the rule, and the
// same one to the application.
func outerSpace(v string) bool {
	return v != "" && (v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t')
}

// otherHeaderSpelling finds a field of h that is name to a server that
// takes "_" for "-". Go's server stores each field under its canonical
// name, so the spellings to look for are the canonical names with some
// "-" made "_" (X_api_key, X-Api_key, X_api-Key for X-Api-Key): looked up
// one by one, without allocating, for names of up to 4 hyphens and 64
// bytes; longer names are searched field by field.
func otherHeaderSpelling(h map[string][]string, name string) (string, bool) {
	var pos [4]int
	n := 0
	for i := 0; i < len(name); i++ {
		if name[i] == '-' || name[i] == '_' {
			if n == len(pos) {
				return searchSpelling(h, name)
			}
			pos[n] = i
			n++
		}
	}
	if n == 0 || len(name) > 64 {
		if n == 0 {
			return "", false
		}
		return searchSpelling(h, name)
	}
	var buf [64]byte
	b := buf[:len(name)]
	for mask := 1; mask < 1<<n; mask++ {
		copy(b, name)
		for j := 0; j < n; j++ {
			if mask&(1<<j) != 0 {
				// Flip the separator; canonical form capitalises only
				// after "-".
				i := pos[j]
				if b[i] == '-' {
					b[i] = '_'
					if i+1 < len(b) && 'A' <= b[i+1] && b[i+1] <= 'Z' {
						b[i+1] += 'a' - 'A'
					}
				} else {
					b[i] = '-'
					if i+1 < len(b) && 'a' <= b[i+1] && b[i+1] <= 'z' {
						b[i+1] -= 'a' - 'A'
					}
				}
			}
		}
		if _, ok := h[string(b)]; ok {
			return string(b), true
		}
	}
	return "", false
}

// searchSpelling is otherHeaderSpelling field by field.
func searchSpelling(h map[string][]string, name string) (string, bool) {
	for k := range h {
		if len(k) == len(name) && k != name && sameName(k, name) {
			return k, true
		}
	}
	return "", false
}

// commasInSyntax reports whether a field's single value may hold commas:
//   - a date (Date, Expires, Last-Modified, If-Modified-Since,
//     If-Unmodified-Since, If-Range);
//   - a product comment, as in "(KHTML, like Gecko)" (User-Agent);
//   - a cookie (Cookie);
//   - credentials with parameters (Authorization);
//   - a URL (Referer);
//   - a list the rule keys on as a whole (Accept, Accept-Encoding,
//     Accept-Language, Accept-Charset, Cache-Control);
//   - a forwarding list, which the client address reads item by item (Via,
//     X-Forwarded-For, Forwarded; see Client address).
func commasInSyntax(name string) bool {
	switch name {
	case "User-Agent", "Cookie", "Date", "Expires", "Last-Modified", "If-Modified-Since", "If-Unmodified-Since", "If-Range",
		"Accept", "Accept-Encoding", "Accept-Language", "Accept-Charset", "Cache-Control", "Authorization", "Referer",
		"Via", "X-Forwarded-For", "Forwarded":
		return true
	}
	return false
}

// sameName reports whether a and b, of one length, are one field name to a
// server that ignores case and takes "_" for "-".
func sameName(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := lower(a[i]), lower(b[i])
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if x != y {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// param returns the request's value of query parameter name. It records a
// problem when the query string has the name more than once, another
// spelling of it (K for k, as ASP.NET reads it; k.x, k x and k[x] for k_x,
// k[] for k, as PHP does), a ";" (some servers split pairs at it, Go drops
// the pair) or a malformed %-escape (Go drops the pair, others decode it
// their way): each could hide a second value from the rule.
func (q *request) param(name string) (string, bool) {
	val, n, problem := scanParam(q.r.URL.RawQuery, name)
	if q.bad == "" {
		if problem == "" && n > 1 {
			problem = "query parameter " + quote(name) + " is sent " + strconv.Itoa(n) + " times"
		}
		q.bad = problem
	}
	if n == 0 {
		return "", false
	}
	v, _ := unescapeQuery(val)
	return v, true
}

// scanParam finds name in the raw query string: the raw value of its first
// pair, how many pairs have it, and the first problem that keeps the query
// from having one value for it.
func scanParam(raw, name string) (val string, n int, problem string) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		if strings.IndexByte(pair, ';') >= 0 {
			if problem == "" {
				problem = `the query string holds a ";", which some servers take for "&"`
			}
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, ok := unescapeQuery(k)
		if !ok || !validEscapes(v) {
			if problem == "" {
				problem = "the query string holds a malformed %-escape"
			}
			continue
		}
		switch {
		case key == name:
			if n == 0 {
				val = v
			}
			n++
		case problem == "" && otherSpelling(key, name):
			problem = "query parameter " + strconv.Quote(key) + " is another spelling of " + quote(name)
		}
	}
	return val, n, problem
}

// otherSpelling reports whether some server reads query parameter key as
// name: ignoring case, leading spaces, what follows a NUL (PHP's C string
// ends there), "[...]" after the name, and taking ".", " " and "[" for "_".
func otherSpelling(key, name string) bool {
	key = strings.TrimLeft(key, " ")
	if i := strings.IndexByte(key, 0); i >= 0 {
		key = key[:i]
	}
	if len(key) > len(name) && key[len(name)] == '[' {
		key = key[:len(name)]
	}
	if len(key) != len(name) {
		return false
	}
	for i := 0; i < len(key); i++ {
		x, y := lower(key[i]), lower(name[i])
		if x == '.' || x == ' ' || x == '[' {
			x = '_'
		}
		if y == '.' || y == ' ' || y == '[' {
			y = '_'
		}
		if x != y {
			return false
		}
	}
	return true
}

// unescapeQuery decodes a query string component as url.ParseQuery does,
// without allocating when there is nothing to decode.
func unescapeQuery(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, true
	}
	u, err := url.QueryUnescape(s)
	return u, err == nil
}

// validEscapes reports whether every "%" in s starts an escape of two hex
// digits.
func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) {
				return false
			}
			if _, ok := unhex(s[i+1]); !ok {
				return false
			}
			if _, ok := unhex(s[i+2]); !ok {
				return false
			}
			i += 2
		}
	}
	return true
}

// methodOverrides are the headers with which frameworks let a request
// choose the method the application sees (in canonical form).
var methodOverrides = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// method returns the request's method. It records a problem when the
// method has a lower-case letter, or the request also asks for another
// method, by a method-override header or a _method query parameter
// (Symfony and Laravel read one on a POST): the application would then
// serve a method the rule did not see.
func (q *request) method() string {
	if q.bad != "" {
		return q.r.Method
	}
	for i := 0; i < len(q.r.Method); i++ {
		if c := q.r.Method[i]; 'a' <= c && c <= 'z' {
			// Methods are case-sensitive, but Django and Flask serve
			// "post" as POST.
			q.bad = "method " + quote(q.r.Method) + " is not in upper case"
			return q.r.Method
		}
	}
	for _, h := range methodOverrides {
		vals := q.r.Header[h]
		if len(vals) > 1 || len(vals) == 1 && !strings.EqualFold(vals[0], q.r.Method) {
			q.bad = "header " + quote(h) + " overrides the method"
			return q.r.Method
		}
	}
	if q.r.URL.RawQuery != "" {
		val, n, _ := scanParam(q.r.URL.RawQuery, "_method")
		v, _ := unescapeQuery(val)
		if n > 1 || n == 1 && !strings.EqualFold(v, q.r.Method) {
			q.bad = `query parameter "_method" overrides the method`
		}
	}
	return q.r.Method
}

// takeBad returns the problem recorded since the last call, and clears it.
func (q *request) takeBad() string {
	b := q.bad
	q.bad = ""
	return b
}

// validateMethods reports the match values of method that no request can
// have: a method with a lower-case letter is refused.
func validateMethods(rules []Rule, p *problems) {
	for i := range rules {
		for _, v := range rules[i].Match["method"] {
			if strings.ToUpper(v) != v {
				p.add(rules[i].Name, i, "match.method", "no request can match %s: a method with a lower-case letter is refused; write %s", quote(v), quote(strings.ToUpper(v)))
			}
		}
	}
}

// host returns the request's host as a server matches a name to it: Go's
// server keeps it in Request.Host (from an absolute-form target, else the
// Host header), not among the headers; the check API's request has it as
// a header.
func (q *request) host() (string, bool) {
	h := q.r.Host
	if h == "" {
		if h = q.r.Header.Get("Host"); h == "" {
			return "", false
		}
	}
	return hostName(h), true
}

// hostName is host as a server name: lower case, without a port or a
// trailing dot, which nginx and most servers ignore when they pick one.
// It allocates only to fold case.
func hostName(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.IndexByte(h[i:], ']') < 0 {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	for i := 0; i < len(h); i++ {
		if 'A' <= h[i] && h[i] <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// validateHosts reports the match values of header:host that no request
// can have: the host is read lower case, without port or trailing dot.
func validateHosts(rules []Rule, p *problems) {
	for i := range rules {
		for k, vals := range rules[i].Match {
			spec, _ := parseKey(k, true)
			if spec.kind != kindHeader || spec.name != "Host" {
				continue
			}
			for _, v := range vals {
				if h := hostName(v); h != v {
					p.add(rules[i].Name, i, "match."+k, "no request can match %s: the host is read lower case, without port or trailing dot; write %s", quote(v), quote(h))
				}
			}
		}
	}
}
