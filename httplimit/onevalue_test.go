package httplimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// A rule keys, matches and charges on one value of a header or query
// parameter, the one the application behind it reads: "X-Api-Key: rnd<i>"
// then "X-Api-Key: victim", keyed on rnd<i>, would let an application
// reading the last line spend the victim's quota. Every shape that gives
// the application another value than the rule's is refused, 400
// ambiguous_value, and takes nothing.
func TestRepeatedKeyValues(t *testing.T) {
	doc := `{"rules":[
	 {"name":"key","limit_keys":["header:X-Api-Key"],"match":{"path_prefix":"/h"},"algorithm_config":{"rps":1,"burst":1}},
	 {"name":"param","limit_keys":["query:k_x"],"match":{"path_prefix":"/q"},"algorithm_config":{"rps":1,"burst":1}},
	 {"name":"plan","limit_keys":["ip:address"],"match":{"header:X-Plan":"free","path_prefix":"/m"},"algorithm_config":{"rps":1,"burst":1}},
	 {"name":"posts","limit_keys":["ip:address"],"match":{"method":"POST","path_prefix":"/p"},"algorithm_config":{"rps":1,"burst":1}}]}`
	refused := []struct {
		method, target string
		headers        []string
		detail         string
	}{
		{"GET", "/h", []string{"X-Api-Key", "rnd1", "X-Api-Key", "victim"}, `header "X-Api-Key" is sent 2 times`},
		{"GET", "/h", []string{"X-Api-Key", "rnd1, victim"}, `header "X-Api-Key" holds a comma-separated list`},
		{"GET", "/h", []string{"X-Api-Key", "rnd1", "X_Api_Key", "victim"}, `header "X_api_key" is another spelling of "X-Api-Key"`},
		{"GET", "/h", []string{"X-Api-Key", "victim "}, `header "X-Api-Key" has white space around its value`},
		{"GET", "/h", []string{"X-Api-Key", "\tvictim"}, `white space around its value`},
		{"GET", "/h", []string{"X_Api_Key", "victim"}, `another spelling`},
		{"GET", "/h", []string{"X-Api_Key", "victim"}, `another spelling`},
		{"GET", "/h", []string{"X_Api-Key", "victim"}, `header "X_api-Key" is another spelling`},
		{"GET", "/h", []string{"x_api_key", "victim"}, `another spelling`},
		{"GET", "/h", []string{"X-Api-Key", "rnd1", "Connection", "keep-alive, X-Api-Key"}, `named in Connection`},
		{"GET", "/q?k_x=rnd1&k_x=victim", nil, `query parameter "k_x" is sent 2 times`},
		{"GET", "/q?k_x=rnd1&K_X=victim", nil, `query parameter "K_X" is another spelling of "k_x"`},
		{"GET", "/q?k_x=rnd1&k.x=victim", nil, `"k.x" is another spelling`},
		{"GET", "/q?k_x=rnd1&k+x=victim", nil, `"k x" is another spelling`},
		{"GET", "/q?k.x=victim", nil, `another spelling`},
		{"GET", "/q?k_x=rnd1&k_x[]=victim", nil, `another spelling`},
		{"GET", "/q?k_x=rnd1&k_x%00=victim", nil, `another spelling`},
		{"GET", "/q?k_x=rnd1&k.x%00[a]=victim", nil, `another spelling`},
		{"GET", "/q?k_x=rnd1;k_x=victim", nil, `";"`},
		{"GET", "/q?k_x=rnd1&k_%zz=victim", nil, `malformed %-escape`},
		{"GET", "/q?k_x=rnd1&%6B_x=victim", nil, `sent 2 times`},
		{"GET", "/m", []string{"X-Plan", "enterprise", "X-Plan", "free"}, `header "X-Plan" is sent 2 times`},
		{"GET", "/m", []string{"X-Plan", "enterprise,free"}, `comma-separated`},
		{"GET", "/m", []string{"X-Plan", "free  "}, `white space`},
		{"POST", "/p", []string{"X-HTTP-Method-Override", "DELETE"}, `header "X-Http-Method-Override" overrides the method`},
		{"GET", "/p", []string{"X-Method-Override", "POST"}, `overrides the method`},
		{"POST", "/p?_method=PUT", nil, `query parameter "_method" overrides the method`},
	}
	for _, tt := range refused {
		l, _ := newLimiter(t, doc, httplimit.Options{})
		r := req("192.0.2.1:1", tt.target, tt.headers...)
		r.Method = tt.method
		w := serve(l, r)
		var p httplimit.Problem
		err := json.Unmarshal(w.Body.Bytes(), &p)
		if w.Code != 400 || err != nil || p.Reason != httplimit.ReasonAmbiguousValue || !strings.Contains(p.Detail, tt.detail) {
			t.Errorf("%s %s %q: %d %s, want 400 ambiguous_value with %s", tt.method, tt.target, tt.headers, w.Code, w.Body, tt.detail)
		}
		refusals := uint64(0)
		for _, s := range l.Stats() {
			refusals += s.Refused
		}
		if refusals != 1 {
			t.Errorf("%s %q: %d refusals counted, want 1", tt.target, tt.headers, refusals)
		}
	}

	// Requests with one value, and requests no rule reads the value of,
	// are unaffected.
	admitted := []struct {
		method, target string
		headers        []string
	}{
		{"GET", "/h", []string{"X-Api-Key", "victim"}},
		{"GET", "/h", []string{"X-Api-Key", "a b"}},
		{"GET", "/h", nil},
		{"GET", "/h?k_x=a&k_x=b", []string{"X-Api-Key", "a", "X-Other", "1", "X-Other", "2"}},
		{"GET", "/h", []string{"X-Api-Key", "a", "Connection", "keep-alive", "X-Forwarded-For", "192.0.2.7, 192.0.2.8"}},
		{"GET", "/q?k_x=a%2Cb&other=1&other=2&k=3", nil},
		{"GET", "/q?k_x=%76ictim", nil},
		{"GET", "/m", []string{"X-Plan", "free"}},
		{"GET", "/other?k_x=1&k_x=2;", []string{"X-Api-Key", "a", "X-Api-Key", "b", "X-Plan", "a,b", "X-HTTP-Method-Override", "PUT"}},
		{"POST", "/p", []string{"X-HTTP-Method-Override", "post"}},
		{"POST", "/p?_method=POST", nil},
	}
	for _, tt := range admitted {
		l, _ := newLimiter(t, doc, httplimit.Options{})
		r := req("192.0.2.1:1", tt.target, tt.headers...)
		r.Method = tt.method
		if w := serve(l, r); w.Code != 200 {
			t.Errorf("%s %s %q: %d %s, want 200", tt.method, tt.target, tt.headers, w.Code, w.Body)
		}
	}

	// A shadow rule never refuses: it reports the request, and takes
	// nothing for it.
	l, _ := newLimiter(t, `{"rules":[{"name":"key","limit_keys":["header:X-Api-Key"],"mode":"shadow","algorithm_config":{"rps":1,"burst":1}}]}`,
		httplimit.Options{Headers: httplimit.HeadersDraft | httplimit.HeadersShadow})
	w := serve(l, req("192.0.2.1:1", "/", "X-Api-Key", "a", "X-Api-Key", "b"))
	if w.Code != 200 || w.Header().Get(httplimit.ReasonHeader) != httplimit.ReasonShadowPrefix+httplimit.ReasonAmbiguousValue {
		t.Errorf("shadow: %d %q, want 200 shadow_ambiguous_value", w.Code, w.Header().Get(httplimit.ReasonHeader))
	}
	if s := l.Stats()[0]; s.ShadowDenied != 1 || s.Refused != 0 {
		t.Errorf("shadow: stats %+v, want one shadow denial", s)
	}
}

// The check API takes one value per header and parameter, but a service
// that joined repeated lines with commas, or passes another spelling, gets
// the same refusal.
func TestCheckAPIRefusesAmbiguousValues(t *testing.T) {
	l, _ := newLimiter(t, `{"rules":[{"name":"key","limit_keys":["header:X-Api-Key","query:k"],"algorithm_config":{"rps":1,"burst":1}}]}`, httplimit.Options{})
	for _, body := range []string{
		`{"headers":{"X-Api-Key":"rnd1, victim"},"query":{"k":"a"}}`,
		`{"headers":{"X-Api-Key":"rnd1","X_Api_Key":"victim"},"query":{"k":"a"}}`,
		`{"headers":{"X-Api-Key":"rnd1"},"query":{"k":"a","K":"b"}}`,
	} {
		res := postCheck(t, l, body)
		if res.Allowed || res.Status != 400 || res.Reason != httplimit.ReasonAmbiguousValue {
			t.Errorf("%s: %+v, want 400 ambiguous_value", body, res.Result)
		}
	}
	if res := postCheck(t, l, `{"headers":{"X-Api-Key":"victim"},"query":{"k":"a"}}`); !res.Allowed {
		t.Errorf("one value each: %+v, want allowed", res.Result)
	}
}

func postCheck(t *testing.T, l *httplimit.Middleware, body string) httplimit.CheckResponse {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPost, "/check", strings.NewReader(body))
	w := httptest.NewRecorder()
	l.CheckHandler().ServeHTTP(w, r)
	var out httplimit.CheckResponse
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s: %d %s", body, w.Code, w.Body)
	}
	return out
}

// Another spelling is found whichever separators the rule's name has, and
// however many.
func TestHeaderSpellings(t *testing.T) {
	for _, tt := range []struct{ key, sent string }{
		{"X_Tenant", "X-Tenant"},
		{"A-B-C-D-E-F", "A-B-C_D-E-F"},
		{"A-B-C-D-E-F", "A_B_C_D_E_F"},
		{"X-Api-Key", "X_API_KEY"},
	} {
		l, _ := newLimiter(t, `{"rules":[{"name":"k","limit_keys":["header:`+tt.key+`"],"algorithm_config":{"rps":1,"burst":1}}]}`, httplimit.Options{})
		if w := serve(l, req("192.0.2.1:1", "/", tt.sent, "v")); w.Code != 400 {
			t.Errorf("rule on %s, %s sent: %d, want 400", tt.key, tt.sent, w.Code)
		}
		if w := serve(l, req("192.0.2.1:1", "/", tt.key, "v")); w.Code != 200 {
			t.Errorf("rule on %s, %s sent: %d, want 200", tt.key, tt.key, w.Code)
		}
	}
}

// Most servers run the GET handler for a HEAD, and Django and Flask
// upper-case the method: HEAD counts as GET (matched and keyed), and a
// method with a lower-case letter is refused where a rule reads the
// method.
func TestMethodSpellings(t *testing.T) {
	doc := `{"rules":[
	 {"name":"gets","limit_keys":["ip:address"],"match":{"method":"GET","path_prefix":"/g"},"algorithm_config":{"rps":1,"burst":1}},
	 {"name":"posts","limit_keys":["ip:address"],"match":{"method":"POST","path_prefix":"/p"},"algorithm_config":{"rps":1,"burst":1}},
	 {"name":"by-method","limit_keys":["method"],"match":{"path_prefix":"/k"},"algorithm_config":{"rps":1,"burst":1}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{})
	for i, tt := range []struct {
		method, target string
		code           int
	}{
		{"HEAD", "/g", 200}, {"HEAD", "/g", 429}, {"GET", "/g", 429},
		{"POST", "/p", 200}, {"post", "/p", 400}, {"Post", "/p", 400}, {"POST", "/p", 429},
		{"get", "/k", 400}, {"GET", "/k", 200}, {"HEAD", "/k", 429},
		{"get", "/other", 200},
	} {
		r := req("192.0.2.1:1", tt.target)
		r.Method = tt.method
		w := serve(l, r)
		if w.Code != tt.code {
			t.Errorf("%d: %s %s: %d %s, want %d", i, tt.method, tt.target, w.Code, w.Body, tt.code)
		}
		if w.Code == 400 && !strings.Contains(w.Body.String(), `method \"`+tt.method+`\" is not in upper case`) {
			t.Errorf("%d: %s %s: %s, want the method named", i, tt.method, tt.target, w.Body)
		}
	}
	rules, _ := httplimit.ParseRules([]byte(`{"rules":[{"name":"r","limit_keys":["ip:address"],"match":{"method":"get"},"algorithm_config":{"rps":1,"burst":1}}]}`))
	_, err := httplimit.New(rules, httplimit.Options{})
	if err == nil || !strings.Contains(err.Error(), `write "GET"`) {
		t.Errorf("a rule matching method get: %v, want it refused", err)
	}
}

// Go's server keeps the Host header in Request.Host, so a rule matching
// header:host never applied and one keyed on it had one bucket for every
// host. The host is read there, as a server name: lower case, without the
// port or a trailing dot.
func TestHostRules(t *testing.T) {
	doc := `{"rules":[
	 {"name":"vhost","limit_keys":["ip:address"],"match":{"header:host":"api.example.com"},"algorithm_config":{"rps":1,"burst":1}},
	 {"name":"per-host","limit_keys":["header:Host"],"match":{"path_prefix":"/k"},"algorithm_config":{"rps":1,"burst":1}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{})
	for i, tt := range []struct {
		target, host string
		code         int
	}{
		{"/x", "api.example.com", 200}, {"/x", "API.Example.com:443", 429}, {"/x", "api.example.com.", 429},
		{"/x", "other.example", 200},
		{"/k", "a.example", 200}, {"/k", "b.example", 200}, {"/k", "A.example:8080", 429},
		{"/k", "[2001:db8::1]:80", 200}, {"/k", "[2001:DB8::1]", 429},
	} {
		r := req("192.0.2.1:1", tt.target)
		r.Host = tt.host
		if w := serve(l, r); w.Code != tt.code {
			t.Errorf("%d: %s Host %s: %d, want %d", i, tt.target, tt.host, w.Code, tt.code)
		}
	}
	rules, _ := httplimit.ParseRules([]byte(`{"rules":[{"name":"r","limit_keys":["ip:address"],"match":{"header:host":"API.example.com:80"},"algorithm_config":{"rps":1,"burst":1}}]}`))
	if _, err := httplimit.New(rules, httplimit.Options{}); err == nil || !strings.Contains(err.Error(), `write "api.example.com"`) {
		t.Errorf("a rule matching host API.example.com:80: %v, want it refused", err)
	}
}
