package httplimit_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

// 10 a second, bursts of 1, a wait of up to 1 s.
const delayRules = `{"rules":[{"name":"smooth","limit_keys":["header:X-Key"],
	"algorithm_config":{"rps":10,"burst":1},"delay":{"max_delay":"1s"}}]}`

// Requests over the rate wait their turn, in the order they came, a
// tenth of a second apart; one that would wait past max_delay is denied,
// with a Retry-After after which it would not.
func TestDelayQueuesInOrder(t *testing.T) {
	l, c := newLimiter(t, delayRules, httplimit.Options{})
	for i := range 11 {
		res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a"))
		want := time.Duration(i) * 100 * time.Millisecond
		if !res.Allowed || res.Delay != want || res.DelayMS != want.Milliseconds() {
			t.Fatalf("request %d: allowed %v, delay %v (%d ms); want allowed, %v", i, res.Allowed, res.Delay, res.DelayMS, want)
		}
	}
	res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a"))
	if res.Allowed || res.Reason != httplimit.ReasonExceeded || res.Policies[0].RetryIn != 1 {
		t.Fatalf("request 12, due in 1.1 s: %+v; want denied, retry in 1 s (then it waits 1 s)", res)
	}
	if res.RetryAfter < 1 {
		t.Errorf("Retry-After %d, want at least 1", res.RetryAfter)
	}
	c.Add(100 * time.Millisecond)
	if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a")); !res.Allowed || res.Delay != time.Second {
		t.Errorf("request a tenth later: allowed %v, delay %v; want allowed, 1s", res.Allowed, res.Delay)
	}
	if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "b")); !res.Allowed || res.Delay != 0 {
		t.Errorf("another key: delay %v, want 0", res.Delay)
	}
	if s := l.Stats()[0]; s.Delayed != 11 || s.Allowed != 13 || s.Denied != 1 {
		t.Errorf("Stats %+v, want 13 allowed, 11 of them delayed, 1 denied", s)
	}
}

// queue bounds the tokens a key's waiting requests hold, before max_delay
// does.
func TestDelayQueueBound(t *testing.T) {
	l, _ := newLimiter(t, strings.Replace(delayRules, `"max_delay":"1s"`, `"max_delay":"1s","queue":3`, 1), httplimit.Options{})
	for i := range 4 { // one now, three in line
		if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a")); !res.Allowed {
			t.Fatalf("request %d denied", i)
		}
	}
	if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a")); res.Allowed {
		t.Errorf("fifth request with 3 in line, queue 3: admitted with delay %v, want denied", res.Delay)
	}
}

// virtualWait makes l wait on a virtual clock: each wait is recorded, and
// ends at once unless the request's context has ended.
func virtualWait(l *httplimit.Middleware) *[]time.Duration {
	var mu sync.Mutex
	waits := new([]time.Duration)
	httplimit.SetSleep(l, func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		return ctx.Err()
	})
	return waits
}

// Over any span, what the handler passes on is at most burst + rate ×
// span, however the requests arrive: checked on random arrivals, on a
// virtual clock, with each request passed on when its wait ends.
func TestDelayForwardedRateBound(t *testing.T) {
	const rate, burst = 50.0, 5.0
	l, c := newLimiter(t, `{"rules":[{"name":"smooth","limit_keys":["global"],
		"algorithm_config":{"rps":50,"burst":5},"delay":{"max_delay":"400ms"}}]}`, httplimit.Options{})
	var forwarded []time.Time
	var at time.Time
	var last time.Duration
	httplimit.SetSleep(l, func(ctx context.Context, d time.Duration) error { last = d; return nil })
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded = append(forwarded, at.Add(last))
	}))
	rng := rand.New(rand.NewPCG(1, 2))
	denied := 0
	for range 3000 {
		// Bursts and lulls: mostly far over the rate, sometimes idle.
		gap := time.Duration(rng.ExpFloat64() * float64(4*time.Millisecond))
		if rng.IntN(50) == 0 {
			gap += time.Duration(rng.IntN(500)) * time.Millisecond
		}
		c.Add(gap)
		at, last = c.Now(), 0
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req("192.0.2.1:1", "/"))
		if w.Code != http.StatusOK {
			denied++
		}
		if last > 400*time.Millisecond {
			t.Fatalf("a request waited %v, past max_delay", last)
		}
	}
	if denied == 0 || len(forwarded) < 500 {
		t.Fatalf("%d forwarded, %d denied: the load did not test the bound", len(forwarded), denied)
	}
	sort.Slice(forwarded, func(i, j int) bool { return forwarded[i].Before(forwarded[j]) })
	for i := range forwarded {
		for j := i; j < len(forwarded); j++ {
			span := forwarded[j].Sub(forwarded[i]).Seconds()
			if n := float64(j - i + 1); n > burst+rate*span+1e-9 {
				t.Fatalf("%v forwarded in %.4f s, more than burst + rate × span = %.3f", n, span, burst+rate*span)
			}
			if span > 1 {
				break
			}
		}
	}
}

// A request whose client leaves while it waits gives its tokens back: the
// next one waits no longer than it would have without it.
func TestDelayCancelGivesBack(t *testing.T) {
	l, _ := newLimiter(t, delayRules, httplimit.Options{})
	virtualWait(l)
	serve(l, req("192.0.2.1:1", "/", "X-Key", "a")) // takes the burst
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	l.Handler(okHandler).ServeHTTP(w, req("192.0.2.1:1", "/", "X-Key", "a").WithContext(ctx))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get(httplimit.ReasonHeader) != httplimit.ReasonCancelled {
		t.Fatalf("request whose client left while waiting: %d %q, want 503 %s", w.Code, w.Header().Get(httplimit.ReasonHeader), httplimit.ReasonCancelled)
	}
	if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a")); res.Delay != 100*time.Millisecond {
		t.Errorf("next request waits %v, want 100ms: the cancelled one's token came back", res.Delay)
	}
	if s := l.DelayStats(); s.Cancelled != 1 || s.Waiting != 0 {
		t.Errorf("DelayStats %+v, want 1 cancelled, none waiting", s)
	}
}

// A request under two rules reserves from both or neither: denied by a
// rule without delay, it leaves the delayed rule's bucket as it was.
func TestDelayAllOrNothing(t *testing.T) {
	l, _ := newLimiter(t, `{"rules":[
		{"name":"smooth","limit_keys":["header:X-Key"],"algorithm_config":{"rps":10,"burst":1},"delay":{"max_delay":"1s"}},
		{"name":"strict","limit_keys":["ip:address"],"algorithm_config":{"rps":1,"burst":2}}]}`, httplimit.Options{})
	for i, want := range []time.Duration{0, 100 * time.Millisecond} {
		if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a")); !res.Allowed || res.Delay != want {
			t.Fatalf("request %d: allowed %v, delay %v; want %v", i, res.Allowed, res.Delay, want)
		}
	}
	res := l.Check(req("192.0.2.1:1", "/", "X-Key", "a"))
	if res.Allowed || res.DeniedBy != "strict" {
		t.Fatalf("third request: %+v, want denied by strict", res)
	}
	// From another address: strict has room, and smooth's line holds only
	// the second request.
	if res := l.Check(req("192.0.2.2:1", "/", "X-Key", "a")); !res.Allowed || res.Delay != 200*time.Millisecond {
		t.Errorf("request from elsewhere: allowed %v, delay %v; want 200ms (the denied one reserved nothing)", res.Allowed, res.Delay)
	}
}

// MaxWaiting bounds the requests that wait at once, across keys; one
// more is denied with the wait it would have had.
func TestDelayMaxWaiting(t *testing.T) {
	l, _ := newLimiter(t, delayRules, httplimit.Options{MaxWaiting: 2})
	release := make(chan struct{})
	waiting := make(chan struct{}, 4)
	httplimit.SetSleep(l, func(ctx context.Context, d time.Duration) error {
		waiting <- struct{}{}
		<-release
		return nil
	})
	var wg sync.WaitGroup
	for _, key := range []string{"a", "b"} {
		serve(l, req("192.0.2.1:1", "/", "X-Key", key))
		wg.Add(1)
		go func() { defer wg.Done(); serve(l, req("192.0.2.1:1", "/", "X-Key", key)) }()
		<-waiting
	}
	serve(l, req("192.0.2.1:1", "/", "X-Key", "c"))
	w := serve(l, req("192.0.2.1:1", "/", "X-Key", "c"))
	if w.Code != http.StatusTooManyRequests || w.Header().Get(httplimit.ReasonHeader) != httplimit.ReasonDelayFull || w.Header().Get("Retry-After") != "1" {
		t.Errorf("third waiter with MaxWaiting 2: %d %q Retry-After %q, want 429 %s, 1", w.Code,
			w.Header().Get(httplimit.ReasonHeader), w.Header().Get("Retry-After"), httplimit.ReasonDelayFull)
	}
	if n := l.DelayStats().Waiting; n != 2 {
		t.Errorf("Waiting = %d, want 2", n)
	}
	close(release)
	wg.Wait()
	if s := l.DelayStats(); s.Waiting != 0 || s.Full != 1 {
		t.Errorf("DelayStats %+v, want none waiting, 1 full", s)
	}
	// The denied waiter gave its reservation back.
	if res := l.Check(req("192.0.2.1:1", "/", "X-Key", "c")); res.Delay != 100*time.Millisecond {
		t.Errorf("key c after its waiter was denied: delay %v, want 100ms", res.Delay)
	}
}

// Admit waits as Handler does; a context that ends meanwhile gets
// ReasonCancelled, and done is safe to call.
func TestDelayAdmit(t *testing.T) {
	l, _ := newLimiter(t, delayRules, httplimit.Options{})
	waits := virtualWait(l)
	for i := range 3 {
		res, done := l.Admit(req("192.0.2.1:1", "/", "X-Key", "a"))
		done()
		if !res.Allowed {
			t.Fatalf("request %d denied", i)
		}
	}
	if len(*waits) != 2 || (*waits)[0] != 100*time.Millisecond || (*waits)[1] != 200*time.Millisecond {
		t.Errorf("waits %v, want [100ms 200ms]", *waits)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, done := l.Admit(req("192.0.2.1:1", "/", "X-Key", "a").WithContext(ctx))
	done()
	if res.Allowed || res.Reason != httplimit.ReasonCancelled {
		t.Errorf("Admit with an ended context: %+v, want %s", res, httplimit.ReasonCancelled)
	}
}

func TestDelayRuleErrors(t *testing.T) {
	for _, c := range []struct {
		doc, want string
		opts      httplimit.Options
	}{
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":1},"delay":{"queue":3}}`,
			"delay.max_delay: required", httplimit.Options{}},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":1},"delay":{"max_delay":"soon"}}`,
			`delay.max_delay: must be a span such as "500ms" or "2s", got "soon"`, httplimit.Options{}},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":1},"delay":{"max_delay":"31s"}}`,
			"delay.max_delay: must be from 1ms to 30s (the longest a request may wait here), got 31s", httplimit.Options{}},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":1},"delay":{"max_delay":"2s"}}`,
			"delay.max_delay: must be from 1ms to 1s", httplimit.Options{MaxDelay: time.Second}},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":1},"delay":{"max_delay":"1s","queue":-1}}`,
			"delay.queue: must be 0", httplimit.Options{}},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":1},"mode":"shadow","delay":{"max_delay":"1s"}}`,
			"delay needs mode enforce", httplimit.Options{}},
		{`{"name":"a","limit_keys":["global"],"algorithm":"concurrency","algorithm_config":{"max_in_flight":1},"delay":{"max_delay":"1s"}}`,
			"the rule has none", httplimit.Options{}},
		{`{"name":"a","limit_keys":["global"],"limits":[{"name":"q","quota":5,"period":"day"}],"delay":{"max_delay":"1s"}}`,
			"the rule has none", httplimit.Options{}},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":1},"delay":{"max_delay":"1s","wait":1}}`,
			"delay.wait: unknown field", httplimit.Options{}},
	} {
		rules, err := httplimit.ParseRules([]byte(`{"rules":[` + c.doc + `]}`))
		if err == nil {
			err = httplimit.Validate(rules, c.opts)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.doc, err, c.want)
		}
	}
	if _, err := httplimit.New(nil, httplimit.Options{MaxWaiting: -1}); err == nil || !strings.Contains(err.Error(), "MaxWaiting") {
		t.Errorf("New with MaxWaiting -1: %v", err)
	}
}

// Delay mode needs reservations, which only the in-memory store makes.
func TestDelayRefusedOnOpaqueStore(t *testing.T) {
	rules, _ := httplimit.ParseRules([]byte(delayRules))
	store := engine.NewPool(func(s engine.Spec) (engine.Limiter, error) {
		e, err := engine.New(engine.Config{Limit: s.Limit, Burst: s.Burst})
		return &opaque{e: e}, err
	})
	_, err := httplimit.New(rules, httplimit.Options{Store: store})
	if err == nil || !strings.Contains(err.Error(), "delay mode reserves tokens ahead") {
		t.Errorf("New on a store without reservations: %v", err)
	}
}
