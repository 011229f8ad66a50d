package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

// brokenStore is a memory store whose Limiters fail TakeAll while down is
// set.
type brokenStore struct {
	*engine.Pool
	down atomic.Bool
}

func newBrokenStore() *brokenStore {
	s := &brokenStore{}
	s.Pool = engine.NewPool(func(spec engine.Spec) (engine.Limiter, error) {
		e, err := engine.New(engine.Config{Limit: spec.Limit, Burst: spec.Burst})
		if err != nil {
			return nil, err
		}
		return &opaque{e: e, down: &s.down}, nil
	})
	return s
}
func TestFailOpenAndClosed(t *testing.T) {
	doc := `{"rules":[
	 {"name":"open","limit_keys":["ip:address"],"fail_mode":"open","algorithm_config":{"rps":1,"burst":1}},
	 {"name":"closed","limit_keys":["path"],"match":{"path_prefix":"/pay/"},"fail_mode":"closed","algorithm_config":{"rps":1,"burst":1}}]}`
	store := newBrokenStore()
	var errs atomic.Int64
	l, _ := newLimiter(t, doc, httplimit.Options{Store: store, OnStoreError: func(error) { errs.Add(1) }})
	store.down.Store(true)
	w := serve(l, req("192.0.2.1:1", "/home"))
	checkHeaders(t, "open", w, map[string]string{"RateLimit-Policy": `"open";q=1;w=1`, "RateLimit": "", httplimit.ReasonHeader: ""})
	if w.Code != 200 {
		t.Errorf("fail-open rule with the store down: %d, want 200", w.Code)
	}
	w = serve(l, req("192.0.2.1:1", "/pay/x"))
	if w.Code != 503 {
		t.Errorf("fail-closed rule with the store down: %d, want 503", w.Code)
	}
	checkHeaders(t, "closed", w, map[string]string{"Retry-After": "1", httplimit.ReasonHeader: "store_unavailable", "Content-Type": "application/problem+json"})
	st := l.Stats()
	if st[0].FailedOpen != 1 || st[0].FailedClosed != 1 || st[1].FailedClosed != 1 || errs.Load() != 2 {
		t.Errorf("stats %+v, store errors %d", st, errs.Load())
	}
	store.down.Store(false)
	if w := serve(l, req("192.0.2.1:1", "/pay/x")); w.Code != 200 {
		t.Errorf("store back: %d, want 200", w.Code)
	}
	// The Middleware does not own a store it was given.
	l.Close()
	store.Close()
}

func TestMemoryStoreBindsByID(t *testing.T) {
	s := httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxKeys: 10})
	defer s.Close()
	spec := engine.Spec{ID: "r#1", Name: "r", Limit: 1, Burst: 2}
	a, _ := s.Bind(spec)
	b, _ := s.Bind(spec)
	ctx := context.Background()
	a.Take(ctx, "k", 2)
	if d, _ := b.Take(ctx, "k", 1); d.Allowed {
		t.Errorf("two Binds of one ID do not share buckets: %+v", d)
	}
	s.Release(a)
	if st := b.(*engine.Engine).Stats(); st.Live != 1 {
		t.Errorf("after one release: %+v, want the bucket live", st)
	}
	s.Release(b)
	c, _ := s.Bind(spec)
	if d, _ := c.Take(ctx, "k", 2); !d.Allowed {
		t.Errorf("after every release the ID's buckets start full: %+v", d)
	}
	if _, err := s.Bind(engine.Spec{ID: "bad#2", Name: "bad", Limit: 1, Burst: 0.5}); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("Bind of an invalid limit: %v", err)
	}
}

// A key table filled by floods of API keys keeps limiting new keys: with
// MaxKeys 1000, rule 1 rps and burst 5, five floods of 1000 distinct keys
// used to leave a new key with 20 of 20 requests through; now every key
// that finds the table full shares the rule's overflow bucket, and the
// rule's stats count them.
func TestFullKeyTableStillLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		onFull engine.FullPolicy
	}{{"share", engine.FullShare}, {"deny", engine.FullDeny}} {
		t.Run(tc.name, func(t *testing.T) {
			store := httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxKeys: 1000, OnFull: tc.onFull, SweepInterval: -1})
			defer store.Close()
			now := time.Unix(0, 0)
			l, err := httplimit.New([]httplimit.Rule{{Name: "key", LimitKeys: []string{"header:x-api-key"}, Rate: 1, Burst: 5}},
				httplimit.Options{Store: store, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			check := func(key string) bool {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-Api-Key", key)
				return l.Check(r).Allowed
			}
			flooded := 0
			for flood := range 5 {
				for i := range 1000 {
					now = now.Add(100 * time.Microsecond)
					if check(fmt.Sprintf("flood%d-%d", flood, i)) && flood > 0 {
						flooded++
					}
				}
			}
			got := 0
			for range 20 {
				if check("new-client") {
					got++
				}
			}
			if flooded+got > 5+1 {
				t.Errorf("keys that found the table full got %d (floods) + %d (a new key, of 20): more than burst + rate*span", flooded, got)
			}
			st := l.Stats()[0]
			if st.Overflow != 4020 || st.Live != 1000 {
				t.Errorf("stats %+v: want Overflow 4020 and 1000 live", st)
			}
		})
	}
}

// Many goroutines through the middleware: every decision is one of the
// rule's, and the admitted count is exactly the burst on a frozen clock.
func TestMiddlewareConcurrent(t *testing.T) {
	doc := `{"rules":[{"name":"g","limit_keys":["method"],"algorithm_config":{"rps":1,"burst":100}},
	 {"name":"u","limit_keys":["header:x-user"],"algorithm_config":{"rps":1,"burst":40}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{})
	h := l.Handler(okHandler)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 50 {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req("192.0.2.1:1", "/", "X-User", fmt.Sprint("u", g%4)))
				switch w.Code {
				case 200:
					ok.Add(1)
				case 429:
				default:
					t.Errorf("status %d", w.Code)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 100 {
		t.Errorf("admitted %d, want the global burst 100", ok.Load())
	}
	st := l.Stats()
	if st[0].Allowed != 100 || st[1].Allowed != 100 || st[0].Denied+st[1].Denied != 300 {
		t.Errorf("stats %+v", st)
	}
}

// The check API's keys keep their bytes: JSON that would decode to U+FFFD
// (bytes that are not UTF-8, half a surrogate pair) is refused, because
// "\xff" and "\xfe", or "\ud800" and "\udbff", used to decode to one key and
// share a bucket. Header names that differ only in case are refused too:
// which value counted depended on map order.
func TestCheckAPIKeysKeepTheirBytes(t *testing.T) {
	doc := `{"rules":[{"name":"k","limit_keys":["header:x-key"],"algorithm_config":{"rps":0.001,"burst":1}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{})
	h := l.CheckHandler()
	post := func(body string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body)))
		return w.Code, w.Body.String()
	}
	for _, bad := range []string{
		"{\"headers\":{\"x-key\":\"\xff\"}}",
		"{\"headers\":{\"x-key\":\"\xfe\"}}",
		`{"headers":{"x-key":"\ud800"}}`,
		`{"headers":{"x-key":"\udbff"}}`,
		`{"headers":{"x-key":"\udc00\ud800"}}`,
		`{"headers":{"x-key":"\ud800\u0041"}}`,
		`{"path":"/\ud800"}`,
	} {
		if code, body := post(bad); code != 400 || !strings.Contains(body, "UTF-8") {
			t.Errorf("%q: %d %s, want 400 naming UTF-8", bad, code, body)
		}
	}
	for _, good := range []string{
		`{"headers":{"x-key":"\ud83d\ude00"}}`, // a valid pair
		`{"headers":{"x-key":"\ufffd"}}`,       // U+FFFD itself
		`{"headers":{"x-key":"\\ud800"}}`,      // a backslash, then text
		`{"headers":{"x-key":"é\"\\"}}`,
	} {
		if code, body := post(good); code != 200 || !strings.Contains(body, `"allowed":true`) {
			t.Errorf("%q: %d %s, want its own full bucket", good, code, body)
		}
	}
	for range 5 {
		code, body := post(`{"headers":{"X-Key":"a","x-key":"b"}}`)
		if code != 400 || !strings.Contains(body, `\"X-Key\" and \"x-key\" name the same header`) {
			t.Fatalf("headers differing in case: %d %s, want a 400 naming both", code, body)
		}
	}
	if code, body := post(`{"headers":{"x key":"a"}}`); code != 400 || !strings.Contains(body, "not a header name") {
		t.Errorf("a header name with a space: %d %s", code, body)
	}
}

// The check API's cost obeys each rule's min_cost and max_cost as a
// client's does: "cost":0 used to pass 1000 times of 1000 on burst 5 with
// min_cost 1, whatever cost_out_of_range said.
func TestCheckAPICostIsBounded(t *testing.T) {
	for _, tt := range []struct{ config, body, want string }{
		{`"min_cost":1,"max_cost":5,"cost_out_of_range":"reject"`, `{"cost":0}`, `cost must be a number of at least 0.001`},
		{`"min_cost":1,"max_cost":5,"cost_out_of_range":"reject"`, `{"cost":0.0004}`, `cost must be a number of at least 0.001`},
		{`"min_cost":1,"max_cost":5,"cost_out_of_range":"reject"`, `{"cost":0.5}`, `the check API's \"cost\" is below min_cost 1`},
		{`"min_cost":1,"max_cost":5,"cost_out_of_range":"reject"`, `{"cost":6}`, `the check API's \"cost\" is above max_cost 5`},
		{`"min_cost":1,"max_cost":5,"cost_out_of_range":"reject"`, `{"cost":2}`, `"remaining":3`},
		{`"default_cost":2,"min_cost":2,"max_cost":4`, `{"cost":1}`, `"remaining":3`},   // clamped to 2
		{`"default_cost":2,"min_cost":2,"max_cost":4`, `{"cost":4.5}`, `"remaining":1`}, // clamped to 4
	} {
		doc := `{"rules":[{"name":"r","limit_keys":["header:x-key"],"algorithm_config":{"rps":0.001,"burst":5,"cost_source":"header:x-cost",` + tt.config + `}}]}`
		l, _ := newLimiter(t, doc, httplimit.Options{})
		w := httptest.NewRecorder()
		l.CheckHandler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(tt.body)))
		if !strings.Contains(w.Body.String(), tt.want) {
			t.Errorf("%s with %s: %s, want %s", tt.body, tt.config, w.Body, tt.want)
		}
	}
}

func TestCheckAPI(t *testing.T) {
	l, _ := newLimiter(t, tiersDoc, httplimit.Options{TrustedProxies: nil})
	h := l.CheckHandler()
	post := func(body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body)))
		return w
	}
	w := post(`{"ip":"192.0.2.1","method":"GET","path":"/x","headers":{"x-api-key":"k1"},"cost":20}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"allowed":true`) ||
		!strings.Contains(w.Body.String(), `"RateLimit":"\"free\";r=0;t=2"`) {
		t.Errorf("check: %d %s", w.Code, w.Body.String())
	}
	w = post(`{"headers":{"x-api-key":"k1"}}`)
	for _, want := range []string{`"allowed":false`, `"status":429`, `"reason":"token_bucket_exceeded"`, `"denied_by":"free"`,
		`"retry_after":1`, `"Retry-After":"1"`, `"X-Faucet-Reason":"token_bucket_exceeded"`, `"key":"k1"`} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("denied check lacks %s: %s", want, w.Body.String())
		}
	}
	for _, bad := range []string{`{"ip":"nope"}`, `{"cost":-1}`, `{"cost":0}`, `{"cost":0.0004}`, `{"colour":1}`, `not json`, `{} {}`} {
		if w := post(bad); w.Code != 400 || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want a 400 problem", bad, w.Code, w.Body.String())
		}
	}
	g := httptest.NewRecorder()
	h.ServeHTTP(g, httptest.NewRequest(http.MethodGet, "/v1/check", nil))
	if g.Code != 405 || g.Header().Get("Allow") != "POST" {
		t.Errorf("GET: %d", g.Code)
	}
}

// Header values of a megabyte are bucket keys like any other, and cost a
// bucket no more: 200 live keys of 1 MiB must not hold 200 MiB.
func TestLongKeysAreBounded(t *testing.T) {
	doc := `{"rules":[{"name":"key","limit_keys":["header:x-api-key"],"algorithm_config":{"rps":0.001,"burst":1}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	buf := []byte(strings.Repeat("v", 1<<20))
	before := heap()
	for i := range 200 {
		copy(buf, fmt.Sprintf("%08d", i))
		if w := serve(l, req("192.0.2.1:1", "/", "X-Api-Key", string(buf))); w.Code != 200 {
			t.Fatalf("key %d: %d", i, w.Code)
		}
	}
	if grown := int64(heap()) - int64(before); grown > 200*1024 {
		t.Errorf("heap grew by %d bytes for 200 keys of 1 MiB", grown)
	}
	copy(buf, fmt.Sprintf("%08d", 7))
	if w := serve(l, req("192.0.2.1:1", "/", "X-Api-Key", string(buf))); w.Code != 429 {
		t.Errorf("key 7 again: %d, want its own drained bucket", w.Code)
	}
	if st := l.Stats()[0]; st.Live != 200 {
		t.Errorf("live %d, want 200", st.Live)
	}
	runtime.KeepAlive(buf)
}
