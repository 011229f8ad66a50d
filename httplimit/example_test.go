package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

// A per-client limit of 1 request per second with bursts of 2, in front of
// an application.
func Example() {
	rules, err := httplimit.ParseRules([]byte(`{"rules": [{
		"name": "per-ip",
		"limit_keys": ["ip:address"],
		"algorithm": "token_bucket",
		"algorithm_config": {"rps": 1, "burst": 2}
	}]}`))
	if err != nil {
		panic(err) // names every bad field
	}
	lim, err := httplimit.New(rules, httplimit.Options{})
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	h := lim.Handler(app)

	for range 3 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:4711"
		h.ServeHTTP(w, r)
		fmt.Printf("%d %s retry=%q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 "per-ip";r=1;t=0 retry=""
	// 200 "per-ip";r=0;t=1 retry=""
	// 429 "per-ip";r=0;t=1 retry="1"
}

// The RateLimit fields of a decision made outside a Middleware, here one
// denial by a bucket of 10 refilling 2 a second.
func ExampleNewPolicy() {
	d := engine.Decision{Allowed: false, Remaining: 0.5, RetryAfter: 250 * time.Millisecond, ResetAfter: 4750 * time.Millisecond}
	p := httplimit.NewPolicy("per-user", httplimit.ModeEnforce, "alice", 2, 10, 1, d)
	p.Denied = true
	res := httplimit.Result{Policies: []httplimit.Policy{p}, DeniedBy: p.Name}
	res.RetryAfter = res.JitteredRetryAfter(1)
	h := http.Header{}
	res.WriteHeaders(h)
	fmt.Println(h.Get("RateLimit-Policy"))
	fmt.Println(h.Get("RateLimit"))
	fmt.Println(h.Get("Retry-After"))
	// Output:
	// "per-user";q=10;w=5
	// "per-user";r=0;t=1
	// 1
}
