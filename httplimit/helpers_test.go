package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
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

// newLimiter parses doc and returns a Middleware on a virtual clock.
func newLimiter(t *testing.T, doc string, opts httplimit.Options) (*httplimit.Middleware, *clock) {
	t.Helper()
	rules, err := httplimit.ParseRules([]byte(doc))
	if err != nil {
		t.Fatalf("ParseRules: %v", err)
	}
	return newRuleLimiter(t, opts, rules...)
}

// newRuleLimiter returns a Middleware enforcing rules on a virtual clock,
// unless opts has a clock.
func newRuleLimiter(t *testing.T, opts httplimit.Options, rules ...httplimit.Rule) (*httplimit.Middleware, *clock) {
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
func serve(l *httplimit.Middleware, r *http.Request) *httptest.ResponseRecorder {
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

// opaque is an Engine behind the engine.Limiter interface alone, as a store
// that is neither an engine.TakerAt nor an engine.Retuner shows it; it
// fails while down (if not nil) is set.
type opaque struct {
	e    *engine.Engine
	down *atomic.Bool
}

func (o *opaque) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	var out [1]engine.Decision
	_, err := o.TakeAll(ctx, []engine.Take{{Limiter: o, Key: key, N: n}}, out[:])
	return out[0], err
}

func (o *opaque) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	if o.down != nil && o.down.Load() {
		return -1, fmt.Errorf("store unreachable: %w", engine.ErrUnavailable)
	}
	inner := make([]engine.Take, len(takes))
	for i, tk := range takes {
		inner[i] = tk
		if in, ok := tk.Limiter.(*opaque); ok {
			inner[i].Limiter = in.e
		}
	}
	return o.e.TakeAll(ctx, inner, out)
}

func (o *opaque) Limit() engine.Limit { return o.e.Limit() }
func (o *opaque) Burst() float64      { return o.e.Burst() }
func (o *opaque) Close() error        { return o.e.Close() }
