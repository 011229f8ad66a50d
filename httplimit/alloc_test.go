package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// An admitted request costs the Handler no allocation, headers included,
// for both rule sets of BenchmarkCheck, once the same RateLimit values have
// been written before (each request finds its buckets full again: the clock
// moves a second between requests).
func TestHandlerAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop a quarter of what is put back")
	}
	want := map[string]map[string]string{
		"rules=per-ip": {
			"RateLimit-Policy": `"per-ip";q=1000000000;w=1`,
			"RateLimit":        `"per-ip";r=999999999;t=0`,
		},
		"rules=hierarchy": {
			"RateLimit-Policy": `"user";q=1000000000;w=1, "tenant";q=1000000000;w=1, "global";q=1000000000;w=1`,
			"RateLimit":        `"user";r=999999999;t=0, "tenant";r=999999999;t=0, "global";r=999999999;t=0`,
		},
		"rules=limits": {
			"RateLimit-Policy": `"per-ip-second";q=1000000000;w=1, "per-ip-day";q=1000000000;w=1`,
			"RateLimit":        `"per-ip-second";r=999999999;t=0, "per-ip-day";r=999999999;t=0`,
		},
	}
	for _, rs := range checkRuleSets {
		t.Run(rs.name, func(t *testing.T) {
			l, c := newLimiter(t, rs.doc, httplimit.Options{})
			h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := checkRequest()
			w := httptest.NewRecorder()
			allocs := testing.AllocsPerRun(100, func() {
				c.Add(time.Second)
				clear(w.Header())
				h.ServeHTTP(w, r)
			})
			if w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			checkHeaders(t, rs.name, w, want[rs.name])
			if allocs != 0 {
				t.Errorf("%v allocations per admitted request, want 0", allocs)
			}
		})
	}
}

// The common case, a path already canonical, costs no allocation.
func TestCanonicalPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, p := range []string{"/", "/api/v1/items/42", "/a%20b/c"} {
		if n := testing.AllocsPerRun(100, func() { httplimit.CanonicalPath(p, httplimit.PathOptions{}) }); n != 0 {
			t.Errorf("CanonicalPath(%q): %v allocations, want 0", p, n)
		}
	}
}

// A rule that matches and keys on the path costs no allocation either, for
// a path already canonical: the scan that finds it so allocates nothing.
func TestHandlerAllocationsPathRule(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop a quarter of what is put back")
	}
	l, c := newLimiter(t, `{"rules":[{"name":"api","limit_keys":["path"],"match":{"path_prefix":["/api/"]},"algorithm_config":{"rps":1e9,"burst":1e9}}]}`, httplimit.Options{})
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := req("192.0.2.1:1", "/api/v1/items/42%20x")
	w := httptest.NewRecorder()
	allocs := testing.AllocsPerRun(100, func() {
		c.Add(time.Second)
		clear(w.Header())
		h.ServeHTTP(w, r)
	})
	if w.Code != http.StatusOK || w.Header().Get("RateLimit") == "" {
		t.Fatalf("status %d, RateLimit %q", w.Code, w.Header().Get("RateLimit"))
	}
	if allocs != 0 {
		t.Errorf("%v allocations per admitted request, want 0", allocs)
	}
}

// Writing a denial's 429 costs two allocations: one string holds the
// numbers of Content-Length and Retry-After, one array the values of those
// and of Content-Type, Cache-Control and the reason; the body is built in a
// pooled buffer. WriteProblem, whose rate-limit values are new every time,
// adds a string (but for a single rule's, precomputed) and a slice for
// RateLimit-Policy, and the same for RateLimit.
func TestWriteProblemAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop a quarter of what is put back")
	}
	uncached := map[string]float64{"rules=per-ip": 2 + 3, "rules=hierarchy": 2 + 4}
	for _, rs := range denyRuleSets {
		t.Run(rs.name, func(t *testing.T) {
			l, _ := newLimiter(t, rs.doc, httplimit.Options{})
			r := req("192.0.2.1:1", "/", "X-User", "ann", "X-Tenant", "acme")
			var res httplimit.Result
			for range 2 {
				res = l.Check(r)
			}
			if res.Status != http.StatusTooManyRequests {
				t.Fatalf("status %d, want 429", res.Status)
			}
			cached := httplimit.WriteProblemCached()
			for _, tc := range []struct {
				name  string
				write func(http.ResponseWriter)
				want  float64
			}{
				{"Handler's", func(w http.ResponseWriter) { cached(&res, w) }, 2},
				{"WriteProblem", res.WriteProblem, uncached[rs.name]},
			} {
				w := &discardWriter{h: http.Header{}}
				allocs := testing.AllocsPerRun(100, func() {
					clear(w.h)
					tc.write(w)
				})
				if w.code != http.StatusTooManyRequests || w.h.Get("Content-Length") != strconv.Itoa(w.n/101) {
					t.Fatalf("%s: status %d, Content-Length %q, %d bytes in 101 writes", tc.name, w.code, w.h.Get("Content-Length"), w.n)
				}
				if allocs > tc.want {
					t.Errorf("%s: %v allocations per denial, want at most %v", tc.name, allocs, tc.want)
				}
				t.Logf("%s: %v allocations", tc.name, allocs)
			}
		})
	}
}

// Under an in-flight limit or in delay mode, an admitted request that
// does not wait costs the Handler no allocation either, as long as its
// key has another request in flight (its first allocates its entry in the
// in-flight table): the rule sets of BenchmarkHandlerHeld, with a request
// of the key held open where the rule has an in-flight limit.
func TestHandlerAllocationsHeld(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop a quarter of what is put back")
	}
	for _, rs := range heldRuleSets {
		t.Run(rs.name, func(t *testing.T) {
			l, c := newLimiter(t, rs.doc, httplimit.Options{})
			release := make(chan struct{})
			h := l.Handler(heldNext(release))
			held := strings.Contains(rs.doc, "max_in_flight")
			if held {
				holdOpen(t, h, release)
			}
			r := req("192.0.2.1:1", "/")
			w := &discardWriter{h: http.Header{}}
			allocs := testing.AllocsPerRun(100, func() {
				c.Add(time.Second)
				clear(w.h)
				h.ServeHTTP(w, r)
			})
			if w.code != 0 || w.h.Get("RateLimit") == "" {
				t.Fatalf("status %d, RateLimit %q: want admitted", w.code, w.h.Get("RateLimit"))
			}
			if held && httplimit.InFlightKeys(l) != 1 {
				t.Fatalf("%d keys in flight, want the held one's", httplimit.InFlightKeys(l))
			}
			if s := l.DelayStats(); s.Waiting != 0 {
				t.Fatalf("%d requests wait, want none", s.Waiting)
			}
			if allocs != 0 {
				t.Errorf("%v allocations per admitted request (held open: %v), want 0", allocs, held)
			}
		})
	}
}
