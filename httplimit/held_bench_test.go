package httplimit_test

import (
	"net/http"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// heldRuleSets are the rules BenchmarkHandlerHeld compares, on one key
// (the client's address): a token bucket alone; an in-flight limit; the
// token bucket in delay mode, at a rate no request waits for; and one
// rule with both limits in delay mode. No request is ever denied.
var heldRuleSets = []struct{ name, doc string }{
	{"plain", `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":1e9,"burst":1e9}}]}`},
	{"in_flight", `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"concurrency",
	 "algorithm_config":{"max_in_flight":1000000}}]}`},
	{"delay", `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":1e9,"burst":1e9},
	 "delay":{"max_delay":"1s"}}]}`},
	{"delay_and_in_flight", `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"limits":[
	 {"name":"per-ip-rate","rps":1e9,"burst":1e9},{"name":"per-ip-slots","algorithm":"concurrency","max_in_flight":1000000}],
	 "delay":{"max_delay":"1s"}}]}`},
}

// holdPath is the path of the request holdOpen keeps in flight.
const holdPath = "/hold"

// holdOpen serves, in the background, one request from the address every
// request of heldRuleSets comes from, and keeps it in flight until the
// test ends: the key's in-flight entry then lasts, as it does on a busy
// key, instead of being made and removed by each request.
func holdOpen(tb testing.TB, h http.Handler, release chan struct{}) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(&discardWriter{h: http.Header{}}, req("192.0.2.1:1", holdPath))
	}()
	<-release // handed back by the next handler once it holds the request
	tb.Cleanup(func() {
		release <- struct{}{}
		<-done
	})
}

// heldNext is the next handler of BenchmarkHandlerHeld and its
// allocation tests: it returns at once, but for holdOpen's request, which
// it holds until told.
func heldNext(release chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == holdPath {
			release <- struct{}{}
			<-release
		}
	})
}

// BenchmarkHandlerHeld is what a check through Handler costs under an
// in-flight limit or in delay mode, beside a token bucket alone: an
// admitted request of an existing key, which never waits. A key is in an
// in-flight table only while it has a request in flight, so with one
// request at a time each one adds the key and removes it (rule=in_flight,
// rule=delay_and_in_flight); the /held=1 cases keep another request of the
// key in flight meanwhile, as a busy key has.
func BenchmarkHandlerHeld(b *testing.B) {
	for _, bc := range heldRuleSets {
		for _, held := range []bool{false, true} {
			if held && bc.name != "in_flight" && bc.name != "delay_and_in_flight" {
				continue
			}
			name := "rule=" + bc.name
			if held {
				name += "/held=1"
			}
			b.Run(name, func(b *testing.B) {
				rules, err := httplimit.ParseRules([]byte(bc.doc))
				if err != nil {
					b.Fatal(err)
				}
				l, err := httplimit.New(rules, httplimit.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				release := make(chan struct{})
				h := l.Handler(heldNext(release))
				if held {
					holdOpen(b, h, release)
				}
				r := req("192.0.2.1:1", "/")
				w := &discardWriter{h: http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					clear(w.h)
					h.ServeHTTP(w, r)
				}
				if w.code != 0 || w.h.Get("RateLimit") == "" {
					b.Fatalf("status %d, RateLimit %q: want admitted", w.code, w.h.Get("RateLimit"))
				}
			})
		}
	}
}
