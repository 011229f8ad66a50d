package httplimit_test

import (
	"net/http"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// denyRuleSets are the rule sets BenchmarkWriteProblem denies under: one
// rule, or three that all apply, the last of which denies.
var denyRuleSets = []struct{ name, doc string }{
	{"rules=per-ip", `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":0.01,"burst":1}}]}`},
	{"rules=hierarchy", `{"rules":[
	 {"name":"user","limit_keys":["header:x-user"],"algorithm_config":{"rps":100,"burst":1000}},
	 {"name":"tenant","limit_keys":["header:x-tenant"],"algorithm_config":{"rps":100,"burst":1000}},
	 {"name":"global","limit_keys":["method"],"algorithm_config":{"rps":0.01,"burst":1}}]}`},
}

// discardWriter is a ResponseWriter that keeps the status and the length
// written, and whose header map the caller clears between responses.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header { return w.h }

func (w *discardWriter) WriteHeader(code int) { w.code = code }

func (w *discardWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

// BenchmarkWriteProblem is what writing a denial's 429 costs, once Check
// has decided it.
func BenchmarkWriteProblem(b *testing.B) {
	for _, bc := range denyRuleSets {
		b.Run(bc.name, func(b *testing.B) {
			rules, err := httplimit.ParseRules([]byte(bc.doc))
			if err != nil {
				b.Fatal(err)
			}
			l, err := httplimit.New(rules, httplimit.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			r := req("192.0.2.1:1", "/", "X-User", "ann", "X-Tenant", "acme")
			var res httplimit.Result
			for range 2 {
				res = l.Check(r)
			}
			if res.Status != http.StatusTooManyRequests {
				b.Fatalf("status %d, want 429", res.Status)
			}
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				res.WriteProblem(w)
			}
			if w.code != http.StatusTooManyRequests || w.n == 0 {
				b.Fatalf("status %d, %d bytes", w.code, w.n)
			}
		})
	}
}
