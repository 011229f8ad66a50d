package httplimit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

const adaptiveRules = `{"rules":[{"name":"upstream","limit_keys":["global"],
	"algorithm_config":{"rps":100,"burst":100},
	"adaptive":{"floor":10,"latency_target":"50ms"}}]}`

// upstreamOn is a next handler on clock c that takes latency to answer
// with status.
func upstreamOn(c *clock, latency *time.Duration, status *int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Add(*latency)
		w.WriteHeader(*status)
	})
}

// run sends n requests through h, a second apart in all, and steps l.
func run(t *testing.T, l *httplimit.Middleware, h http.Handler, c *clock, n int, ctx context.Context) {
	t.Helper()
	for range n {
		h.ServeHTTP(httptest.NewRecorder(), req("192.0.2.1:1", "/").WithContext(ctx))
	}
	c.Add(time.Second / 2)
	httplimit.StepAdaptive(l, c.Now())
}

func rateOf(l *httplimit.Middleware) float64 {
	return l.Check(req("192.0.2.1:1", "/")).Policies[0].Rate
}

// What clients do moves nothing: 4xx, and 5xx of requests whose client
// left. Server errors and slow answers bring the rate down, the
// RateLimit-Policy field shows it, and it climbs back to the ceiling while
// the upstream is healthy.
func TestAdaptiveFollowsTheUpstream(t *testing.T) {
	l, c := newLimiter(t, adaptiveRules, httplimit.Options{})
	latency, status := 10*time.Millisecond, http.StatusTooManyRequests
	h := l.Handler(upstreamOn(c, &latency, &status))
	run(t, l, h, c, 50, context.Background())
	if r := rateOf(l); r != 100 {
		t.Fatalf("rate after a step of 429s = %v, want the ceiling, 100: client errors steered it", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	status, latency = http.StatusBadGateway, time.Second
	run(t, l, h, c, 50, ctx)
	if r := rateOf(l); r != 100 {
		t.Fatalf("rate after slow 502s of clients that left = %v, want 100: disconnects steered it", r)
	}
	latency = 10 * time.Millisecond
	run(t, l, h, c, 50, context.Background())
	failing := rateOf(l)
	if failing >= 100 || failing < 10 {
		t.Fatalf("rate after a step of 502s = %v, want below 100, at least the floor 10", failing)
	}
	w := serve(l, req("192.0.2.1:1", "/"))
	if got, want := w.Header().Get("RateLimit-Policy"), `"upstream";q=100;w=`; !strings.HasPrefix(got, want) || got == want+"1" {
		t.Errorf("RateLimit-Policy = %q, want the w of the lower rate", got)
	}
	// Healthy again: it climbs to the ceiling, never past it.
	status = http.StatusOK
	for range 150 {
		run(t, l, h, c, 40, context.Background())
	}
	if r := rateOf(l); r != 100 {
		t.Errorf("rate after a healthy while = %v, want the ceiling, 100", r)
	}
	// Slow answers bring it down too.
	latency = 200 * time.Millisecond
	run(t, l, h, c, 50, context.Background())
	if r := rateOf(l); r >= 100 {
		t.Errorf("rate after a step of slow answers = %v, want below 100", r)
	}
}

// slowBody is a request body whose client takes 100 ms to send its one
// byte, on clock c.
type slowBody struct {
	c    *clock
	sent bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.sent {
		return 0, io.EOF
	}
	b.c.Add(100 * time.Millisecond)
	p[0], b.sent = 'x', true
	return 1, nil
}

func (b *slowBody) Close() error { return nil }

// A body sent slowly is its client's time, not the upstream's: an
// upstream that reads the body, then answers in 10 ms, is healthy.
func TestAdaptiveSlowBodyIsTheClients(t *testing.T) {
	l, c := newLimiter(t, adaptiveRules, httplimit.Options{})
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c.Add(10 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
	}))
	for range 50 {
		r := req("192.0.2.1:1", "/")
		r.Method, r.Body, r.ContentLength = http.MethodPost, &slowBody{c: c}, 1
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	c.Add(time.Second / 2)
	httplimit.StepAdaptive(l, c.Now())
	if r := rateOf(l); r != 100 {
		t.Errorf("rate after a step of bodies sent in 100 ms to an upstream answering in 10 ms = %v, want 100: the clients steered it", r)
	}
}

// The floor holds however bad the upstream is.
func TestAdaptiveFloorHolds(t *testing.T) {
	l, c := newLimiter(t, adaptiveRules, httplimit.Options{})
	latency, status := 5*time.Second, http.StatusGatewayTimeout
	h := l.Handler(upstreamOn(c, &latency, &status))
	for range 30 {
		c.Add(2 * time.Second)
		run(t, l, h, c, 30, context.Background())
		if r := rateOf(l); r < 10 {
			t.Fatalf("rate %v below the floor 10", r)
		}
	}
	if r := rateOf(l); r != 10 {
		t.Errorf("rate after 30 steps of timeouts = %v, want the floor", r)
	}
}

// A reload that keeps the rule keeps the rate it reached; the buckets
// keep their tokens through every step.
func TestAdaptiveReloadKeepsTheRate(t *testing.T) {
	l, c := newLimiter(t, adaptiveRules, httplimit.Options{})
	latency, status := 300*time.Millisecond, http.StatusOK
	h := l.Handler(upstreamOn(c, &latency, &status))
	run(t, l, h, c, 50, context.Background())
	low := rateOf(l)
	rules, _ := httplimit.ParseRules([]byte(adaptiveRules))
	if err := l.Reload(rules); err != nil {
		t.Fatal(err)
	}
	if r := rateOf(l); r != low {
		t.Errorf("rate after a reload = %v, want the %v it reached", r, low)
	}
}

func TestAdaptiveRuleErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"name":"a","limit_keys":["ip:address"],"algorithm_config":{"rps":10,"burst":10},"adaptive":{"floor":1,"latency_target":"1s"}}`,
			`adaptive: only a rule with "limit_keys": ["global"] can adapt`},
		{`{"name":"a","limit_keys":["global"],"limits":[{"name":"b","rps":10,"burst":10}],"adaptive":{"floor":1,"latency_target":"1s"}}`,
			"adaptive: only a rule with one token bucket can adapt its rate"},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":10,"burst":10},"adaptive":{"floor":20,"latency_target":"1s"}}`,
			"algorithm_config.tokens_per_second: must be at least adaptive.floor"},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":10,"burst":10},"adaptive":{"floor":1}}`,
			"adaptive.latency_target: required"},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":10,"burst":10},"adaptive":{"floor":1,"latency_target":"1s","percentile":1.5}}`,
			"adaptive.percentile: must be 0 (0.99) or between 0 and 1"},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":10,"burst":10},"adaptive":{"floor":1,"latency_target":"2m"}}`,
			"adaptive.latency_target: must be more than 0 and at most 1m0s"},
		{`{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":10,"burst":10},"adaptive":{"floor":1,"latency_target":"1s","step":1}}`,
			"adaptive.step: unknown field"},
	} {
		_, err := httplimit.ParseRules([]byte(`{"rules":[` + c.doc + `]}`))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.doc, err, c.want)
		}
	}
	// A shared store would start every key afresh at each step.
	rules, _ := httplimit.ParseRules([]byte(adaptiveRules))
	shared := engine.NewPool(func(s engine.Spec) (engine.Limiter, error) { return engine.OpenInMemory(engine.Config{}, s) })
	if _, err := httplimit.New(rules, httplimit.Options{Store: shared}); err == nil || !strings.Contains(err.Error(), "only the in-memory store can") {
		t.Errorf("New on a shared store: %v", err)
	}
}

// A handler that streams and asserts http.Flusher works under an
// adaptive rule, whose writer wraps the server's.
func TestAdaptiveKeepsFlusher(t *testing.T) {
	l, _ := newLimiter(t, adaptiveRules, httplimit.Options{})
	flushed := false
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			t.Error("the writer under an adaptive rule is no http.Flusher")
			return
		}
		w.Write([]byte("event"))
		f.Flush()
		flushed = true
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req("192.0.2.1:1", "/"))
	if !flushed || !w.Flushed {
		t.Errorf("flushed %v, recorder flushed %v; want both", flushed, w.Flushed)
	}
}

// A request passed on before a step found the upstream slow is that
// step's to judge: answered after it, it does not count against the rate
// the step lowered, which would lower it again for a queue the lower rate
// did not build.
func TestAdaptiveJudgesEachRequestOnce(t *testing.T) {
	l, c := newLimiter(t, adaptiveRules, httplimit.Options{})
	release := make(chan struct{})
	var entered sync.WaitGroup
	blocked := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Done()
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	var done sync.WaitGroup
	for range 50 {
		entered.Add(1)
		done.Go(func() { blocked.ServeHTTP(httptest.NewRecorder(), req("192.0.2.1:1", "/")) })
	}
	entered.Wait()
	latency, status := 200*time.Millisecond, http.StatusOK
	run(t, l, l.Handler(upstreamOn(c, &latency, &status)), c, 50, context.Background())
	lowered := rateOf(l)
	if lowered >= 100 {
		t.Fatalf("rate after a slow step = %v, want below 100", lowered)
	}
	// The 50 held since before the step are answered now, seconds late.
	c.Add(2 * time.Second)
	close(release)
	done.Wait()
	c.Add(time.Second)
	httplimit.StepAdaptive(l, c.Now())
	if r := rateOf(l); r != lowered {
		t.Errorf("rate after the step that saw only requests of the last = %v, want %v held", r, lowered)
	}
}
