package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

const inFlightRules = `{"rules":[{"name":"conc","limit_keys":["header:X-Key"],"algorithm":"concurrency",
	"algorithm_config":{"max_in_flight":2}}]}`

// gate is a next handler that holds each request until released.
type gate struct {
	entered chan struct{}
	release chan struct{}
	now     atomic.Int64 // requests inside now
	most    atomic.Int64 // the most inside at once
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1024), release: make(chan struct{})} }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := g.now.Add(1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	g.entered <- struct{}{}
	<-g.release
	g.now.Add(-1)
	w.Write([]byte("ok"))
}

func TestInFlightLimitsRequestsAtOnce(t *testing.T) {
	l, _ := newLimiter(t, inFlightRules, httplimit.Options{})
	g := newGate()
	h := l.Handler(g)
	var wg sync.WaitGroup
	codes := make(chan int, 3)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req("192.0.2.1:1", "/", "X-Key", "a"))
			codes <- w.Code
		}()
	}
	<-g.entered
	<-g.entered
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req("192.0.2.1:1", "/", "X-Key", "a"))
	if w.Code != http.StatusTooManyRequests || w.Header().Get(httplimit.ReasonHeader) != httplimit.ReasonInFlightExceeded {
		t.Fatalf("third request in flight: %d %q, want 429 %s", w.Code, w.Header().Get(httplimit.ReasonHeader), httplimit.ReasonInFlightExceeded)
	}
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After before any request finished = %q, want 1", got)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"conc";q=2;qu="concurrent-requests"` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	if !strings.Contains(w.Body.String(), `allows 2 requests in flight at once`) {
		t.Errorf("problem body %s does not say the limit", w.Body)
	}
	// Another key has slots of its own.
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req("192.0.2.1:1", "/", "X-Key", "b"))
		codes <- w.Code
	}()
	<-g.entered
	if s := l.Stats()[0]; s.InFlight != 3 || s.Denied != 1 {
		t.Errorf("Stats: %d in flight, %d denied; want 3, 1", s.InFlight, s.Denied)
	}
	close(g.release)
	wg.Wait()
	for range 2 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("held request answered %d, want 200", c)
		}
	}
	<-codes
	if w := serve(l, req("192.0.2.1:1", "/", "X-Key", "a")); w.Code != http.StatusOK {
		t.Errorf("request after the others finished: %d, want 200", w.Code)
	}
	if n := httplimit.InFlightKeys(l); n != 0 {
		t.Errorf("%d keys left in the in-flight table after every request finished, want 0", n)
	}
	if s := l.Stats()[0]; s.InFlight != 0 {
		t.Errorf("Stats.InFlight after every request finished = %d, want 0", s.InFlight)
	}
}

// A panicking handler, a request a rate limit denies after the slot was
// taken, and a client that leaves: none keeps its slot.
func TestInFlightSlotsNeverLeak(t *testing.T) {
	l, c := newLimiter(t, `{"rules":[{"name":"both","limit_keys":["header:X-Key"],"limits":[
		{"name":"slots","algorithm":"concurrency","max_in_flight":1},
		{"name":"rate","rps":1,"burst":2}]}]}`, httplimit.Options{})
	boom := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	func() {
		defer func() { recover() }()
		boom.ServeHTTP(httptest.NewRecorder(), req("192.0.2.1:1", "/", "X-Key", "a"))
	}()
	if w := serve(l, req("192.0.2.1:1", "/", "X-Key", "a")); w.Code != http.StatusOK {
		t.Fatalf("request after a panicking one: %d %s, want 200 (the slot was released)", w.Code, w.Header().Get(httplimit.ReasonHeader))
	}
	// The bucket is empty now: denied by the rate, with the slot given back.
	w := serve(l, req("192.0.2.1:1", "/", "X-Key", "a"))
	if w.Code != http.StatusTooManyRequests || w.Header().Get(httplimit.ReasonHeader) != httplimit.ReasonExceeded {
		t.Fatalf("third request: %d %s, want 429 by the rate", w.Code, w.Header().Get(httplimit.ReasonHeader))
	}
	if n := httplimit.InFlightKeys(l); n != 0 {
		t.Errorf("%d keys hold slots after a denial by the rate, want 0", n)
	}
	c.Add(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done() // the client left mid-response
	}))
	h.ServeHTTP(httptest.NewRecorder(), req("192.0.2.1:1", "/", "X-Key", "a").WithContext(ctx))
	if n := httplimit.InFlightKeys(l); n != 0 {
		t.Errorf("%d keys hold slots after the client left, want 0", n)
	}
}

// 64 clients against a slow handler: never more than the limit inside,
// and nothing held at the end.
func TestInFlightBoundUnderLoad(t *testing.T) {
	const limit, clients = 5, 64
	l, _ := newLimiter(t, `{"rules":[{"name":"conc","limit_keys":["global"],"algorithm":"concurrency",
		"algorithm_config":{"max_in_flight":5}}]}`, httplimit.Options{})
	var inside, most atomic.Int64
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(200 * time.Microsecond)
		inside.Add(-1)
	}))
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req("192.0.2.1:1", "/"))
				if w.Code == http.StatusOK {
					admitted.Add(1)
				} else {
					denied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Errorf("%d requests inside at once, want at most %d", m, limit)
	}
	if admitted.Load() == 0 {
		t.Error("no request admitted")
	}
	if s := l.Stats()[0]; s.InFlight != 0 || s.Allowed != uint64(admitted.Load()) || s.Denied != uint64(denied.Load()) {
		t.Errorf("Stats %+v; want 0 in flight, %d allowed, %d denied", s, admitted.Load(), denied.Load())
	}
}

// A reload keeps the requests in flight counted, and a lower limit
// applies to the next request.
func TestInFlightReload(t *testing.T) {
	l, _ := newLimiter(t, inFlightRules, httplimit.Options{})
	g := newGate()
	h := l.Handler(g)
	done := make(chan struct{})
	go func() { h.ServeHTTP(httptest.NewRecorder(), req("192.0.2.1:1", "/", "X-Key", "a")); close(done) }()
	<-g.entered
	rules, _ := httplimit.ParseRules([]byte(strings.Replace(inFlightRules, `"max_in_flight":2`, `"max_in_flight":1`, 1)))
	if err := l.Reload(rules); err != nil {
		t.Fatal(err)
	}
	if w := serve(l, req("192.0.2.1:1", "/", "X-Key", "a")); w.Code != http.StatusTooManyRequests {
		t.Errorf("second request after the limit dropped to 1 with one in flight: %d, want 429", w.Code)
	}
	close(g.release)
	<-done
	if w := serve(l, req("192.0.2.1:1", "/", "X-Key", "a")); w.Code != http.StatusOK {
		t.Errorf("request after the one in flight finished: %d, want 200", w.Code)
	}
}

// Check only checks: a slot must be free, and none is held.
func TestInFlightCheckHoldsNothing(t *testing.T) {
	l, _ := newLimiter(t, inFlightRules, httplimit.Options{})
	for range 5 {
		if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a")); !res.Allowed || res.Policies[0].Remaining != 1 {
			t.Fatalf("Check = %+v, want allowed with 1 slot left after it", res)
		}
	}
	res, done := l.Admit(req("192.0.2.1:1", "/", "X-Key", "a"))
	res2, done2 := l.Admit(req("192.0.2.1:1", "/", "X-Key", "a"))
	if !res.Allowed || !res2.Allowed {
		t.Fatal("Admit of two with two slots denied")
	}
	if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a")); res.Allowed || res.Reason != httplimit.ReasonInFlightExceeded {
		t.Errorf("Check with both slots held = %+v, want denied", res)
	}
	done()
	done() // a second call counts for nothing
	if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a")); !res.Allowed {
		t.Errorf("Check after one slot was released: denied")
	}
	done2()
	if n := httplimit.InFlightKeys(l); n != 0 {
		t.Errorf("%d keys left after both released", n)
	}
}

// A shadow in-flight limit reports what it would deny and denies nothing.
func TestInFlightShadow(t *testing.T) {
	l, _ := newLimiter(t, strings.Replace(inFlightRules, `"algorithm":"concurrency"`, `"algorithm":"concurrency","mode":"shadow"`, 1), httplimit.Options{})
	var holds []func()
	for i := range 3 {
		res, done := l.Admit(req("192.0.2.1:1", "/", "X-Key", "a"))
		holds = append(holds, done)
		if !res.Allowed {
			t.Fatalf("request %d denied by a shadow rule", i)
		}
		if want := i == 2; res.Policies[0].Denied != want || (res.Reason == httplimit.ReasonShadowPrefix+httplimit.ReasonInFlightExceeded) != want {
			t.Errorf("request %d: %+v, want would-deny %v", i, res, want)
		}
	}
	for _, d := range holds {
		d()
	}
	if n := httplimit.InFlightKeys(l); n != 0 {
		t.Errorf("%d keys left", n)
	}
	if s := l.Stats()[0]; s.ShadowDenied != 1 || s.Allowed != 2 {
		t.Errorf("Stats %+v, want 2 allowed, 1 shadow-denied", s)
	}
}

// On a store shared with other processes, an in-flight limit would admit
// max_in_flight per process: refused when the rules load.
func TestInFlightRefusedOnSharedStore(t *testing.T) {
	shared := engine.NewPool(func(s engine.Spec) (engine.Limiter, error) { return engine.OpenInMemory(engine.Config{}, s) })
	rules, _ := httplimit.ParseRules([]byte(inFlightRules))
	_, err := httplimit.New(rules, httplimit.Options{Store: shared})
	if err == nil || !strings.Contains(err.Error(), "in-flight limits need the in-memory store") {
		t.Errorf("New on a shared store: %v, want the in-flight limit refused", err)
	}
	if _, err := httplimit.New(rules, httplimit.Options{Store: httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxBytesPerLimit: 1 << 20})}); err != nil {
		t.Errorf("New on a memory store with a memory bound: %v", err)
	}
}

func TestInFlightRuleErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"name":"a","limit_keys":["global"],"algorithm":"concurrency","algorithm_config":{"max_in_flight":0}}`,
			"algorithm_config.max_in_flight: must be a whole number of requests from 1 to 1000000, got 0"},
		{`{"name":"a","limit_keys":["global"],"algorithm":"concurrency","algorithm_config":{"max_in_flight":2.5}}`,
			"got 2.5"},
		{`{"name":"a","limit_keys":["global"],"algorithm":"concurrency","algorithm_config":{}}`,
			"algorithm_config.max_in_flight: required"},
		{`{"name":"a","limit_keys":["global"],"algorithm":"concurrency"}`,
			"algorithm_config: required: an object with max_in_flight"},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":1,"max_in_flight":3}}`,
			`algorithm_config.max_in_flight: only with "algorithm": "concurrency"`},
		{`{"name":"a","limit_keys":["global"],"algorithm":"concurrency","algorithm_config":{"max_in_flight":3,"rps":2}}`,
			"an in-flight limit has max_in_flight, not a rate or a burst"},
		{`{"name":"a","limit_keys":["global"],"algorithm":"concurrency","algorithm_config":{"max_in_flight":3,"cost_source":"header:X-Cost"}}`,
			"each holds one slot"},
		{`{"name":"a","limit_keys":["global"],"limits":[{"name":"b","algorithm":"concurrency"}]}`,
			"limits[0].max_in_flight: required"},
		{`{"name":"a","limit_keys":["global"],"limits":[{"name":"b","max_in_flight":2,"rps":3,"burst":3}]}`,
			"an in-flight limit has max_in_flight alone"},
		{`{"name":"a","limit_keys":["global"],"mode":"shadow","limits":[{"name":"b","max_in_flight":2},{"name":"c","rps":1,"burst":1}]}`,
			"give an in-flight limit in shadow mode a rule of its own"},
	} {
		_, err := httplimit.ParseRules([]byte(`{"rules":[` + c.doc + `]}`))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.doc, err, c.want)
		}
	}
}

// A Middleware that only checks refuses in-flight limits: their slots
// would never be released.
func TestInFlightRefusedCheckOnly(t *testing.T) {
	rules, _ := httplimit.ParseRules([]byte(inFlightRules))
	err := httplimit.Validate(rules, httplimit.Options{CheckOnly: true})
	if err == nil || !strings.Contains(err.Error(), "algorithm: an in-flight limit needs to see its requests end") {
		t.Errorf("Validate with CheckOnly: %v", err)
	}
}

var _ = errors.New

// outliving is a ResponseRecorder whose response outlives its handler, as
// a body fasthttp streams after the handler returned: it keeps the
// function to call once the response was sent.
type outliving struct {
	*httptest.ResponseRecorder
	sent func()
}

func (o *outliving) AfterResponse(f func()) bool {
	o.sent = f
	return true
}

// A response that outlives its handler holds its request's slot until it
// was sent, not only until the handler returned.
func TestInFlightHeldUntilResponseSent(t *testing.T) {
	l, _ := newLimiter(t, inFlightRules, httplimit.Options{})
	h := l.Handler(okHandler)
	var streams []*outliving
	for range 2 {
		o := &outliving{ResponseRecorder: httptest.NewRecorder()}
		h.ServeHTTP(o, req("192.0.2.1:1", "/", "X-Key", "a"))
		if o.Code != http.StatusOK || o.sent == nil {
			t.Fatalf("request under the limit: %d, release handed over %v; want 200, true", o.Code, o.sent != nil)
		}
		streams = append(streams, o)
	}
	if w := serve(l, req("192.0.2.1:1", "/", "X-Key", "a")); w.Code != http.StatusTooManyRequests {
		t.Errorf("third request while two responses are still sent: %d, want 429", w.Code)
	}
	for _, o := range streams {
		o.sent()
	}
	if w := serve(l, req("192.0.2.1:1", "/", "X-Key", "a")); w.Code != http.StatusOK {
		t.Errorf("request once the responses were sent: %d, want 200", w.Code)
	}
	if n := httplimit.InFlightKeys(l); n != 0 {
		t.Errorf("%d keys left in the in-flight table, want 0", n)
	}
}
