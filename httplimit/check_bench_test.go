package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// checkRuleSets are the rule sets BenchmarkCheck measures and
// TestHandlerAllocations holds to no allocation: one rule per IP, a
// three-level hierarchy with a JWT claim, or one rule per IP with two
// limits.
var checkRuleSets = []struct{ name, doc string }{
	{"rules=per-ip", `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":1e9,"burst":1e9}}]}`},
	{"rules=hierarchy", `{"rules":[
	 {"name":"user","limit_keys":["jwt:sub"],"algorithm_config":{"rps":1e9,"burst":1e9},"insecure_unverified_jwt":true},
	 {"name":"tenant","limit_keys":["header:x-tenant"],"algorithm_config":{"rps":1e9,"burst":1e9}},
	 {"name":"global","limit_keys":["method"],"algorithm_config":{"rps":1e9,"burst":1e9}}]}`},
	{"rules=limits", `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"limits":[
	 {"name":"per-ip-second","rps":1e9,"burst":1e9},{"name":"per-ip-day","rps":1e9,"burst":1e9}]}]}`},
}

// checkRequest is the request both send.
func checkRequest() *http.Request {
	return req("192.0.2.1:1", "/", "X-Tenant", "acme", "Authorization", bearer(map[string]any{"sub": "ann"}))
}

// BenchmarkCheck is the limiter's cost per request, without a network.
func BenchmarkCheck(b *testing.B) {
	for _, bc := range checkRuleSets {
		b.Run(bc.name, func(b *testing.B) {
			rules, _ := httplimit.ParseRules([]byte(bc.doc))
			l, _ := httplimit.New(rules, httplimit.Options{})
			defer l.Close()
			h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := checkRequest()
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				clear(w.Header())
				h.ServeHTTP(w, r)
			}
			if w.Code != http.StatusOK {
				b.Fatalf("status %d", w.Code)
			}
		})
	}
}

// BenchmarkCanonicalPath is what every request pays for its path: the scan
// of one already canonical, or the rewrite of one that is not.
func BenchmarkCanonicalPath(b *testing.B) {
	for _, p := range []string{"/", "/api/v1/items/42", "//api/./v1/%69tems/42"} {
		b.Run("path="+p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				httplimit.CanonicalPath(p, httplimit.PathOptions{})
			}
		})
	}
}
