package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newLimiter parses doc and returns a Limiter on a virtual clock.
func newLimiter(t *testing.T, doc string, opts httplimit.Options) (*httplimit.Limiter, *clock) {
	t.Helper()
	rules, err := httplimit.ParseRules([]byte(doc))
	if err != nil {
		t.Fatalf("ParseRules: %v", err)
	}
	return newRuleLimiter(t, opts, rules...)
}

// newRuleLimiter returns a Limiter enforcing rules on a virtual clock,
// unless opts has a clock.
func newRuleLimiter(t *testing.T, opts httplimit.Options, rules ...httplimit.Rule) (*httplimit.Limiter, *clock) {
	t.Helper()
	c := newClock()
	if opts.Now == nil {
		opts.Now = c.Now
	}
	l, err := httplimit.New(rules, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l, c
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })

// serve sends one request through the middleware.
func serve(l *httplimit.Limiter, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	l.Handler(okHandler).ServeHTTP(w, r)
	return w
}

// req builds a request from a remote address with headers as name, value
// pairs.
func req(remote, target string, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	return r
}

// checkHeaders compares response headers with want; "" means absent.
func checkHeaders(t *testing.T, step string, w *httptest.ResponseRecorder, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", step, k, got, v)
		}
	}
}

const perIP = `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
	"algorithm_config":{"rps":10,"burst":20}}]}`
