package httplimit_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

func TestDraftHeadersExactValues(t *testing.T) {
	l, c := newLimiter(t, perIP, httplimit.Options{})
	w := serve(l, req("192.0.2.1:1234", "/"))
	checkHeaders(t, "first", w, map[string]string{
		"RateLimit-Policy":      `"per-ip";q=20;w=2`,
		"RateLimit":             `"per-ip";r=19;t=0`,
		"Retry-After":           "",
		httplimit.ReasonHeader:  "",
		"RateLimit-Limit":       "",
		"X-RateLimit-Remaining": "",
	})
	for range 19 {
		serve(l, req("192.0.2.1:1234", "/"))
	}
	w = serve(l, req("192.0.2.1:1234", "/"))
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("21st request: status %d, want 429", w.Code)
	}
	checkHeaders(t, "21st", w, map[string]string{
		"RateLimit-Policy":     `"per-ip";q=20;w=2`,
		"RateLimit":            `"per-ip";r=0;t=1`,
		"Retry-After":          "1", // base 1 s: jitter in [0, 0.5] rounds to 0
		httplimit.ReasonHeader: "token_bucket_exceeded",
		"Content-Type":         "application/problem+json",
	})
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body: %v (%q)", err, w.Body.String())
	}
	want := map[string]any{"type": httplimit.QuotaExceededType, "title": "Too Many Requests", "status": 429.0,
		"reason": "token_bucket_exceeded", "violated-policies": []any{"per-ip"},
		"detail": `Rule "per-ip" allows 10 tokens per second with bursts of 20; retry after 1 s.`}
	for k, v := range want {
		if fmt.Sprint(p[k]) != fmt.Sprint(v) {
			t.Errorf("problem %s = %v, want %v", k, p[k], v)
		}
	}
	// 150 ms later 1.5 tokens have come back: one request passes, leaving
	// 0.5, and the next would need 0.05 s more: t rounds up to 1.
	c.Add(150 * time.Millisecond)
	w = serve(l, req("192.0.2.1:1234", "/"))
	checkHeaders(t, "after refill", w, map[string]string{"RateLimit": `"per-ip";r=0;t=1`})
	if w.Code != http.StatusOK {
		t.Errorf("after refill: status %d, want 200", w.Code)
	}
	// Another client has its own bucket.
	checkHeaders(t, "other client", serve(l, req("192.0.2.2:1", "/")), map[string]string{"RateLimit": `"per-ip";r=19;t=0`})
}

func TestLegacyAndXHeaders(t *testing.T) {
	doc := `{"rules":[
	 {"name":"user","limit_keys":["header:x-user"],"algorithm_config":{"rps":1,"burst":5}},
	 {"name":"global","limit_keys":["method"],"algorithm_config":{"rps":100,"burst":300}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{Headers: httplimit.HeadersDraft | httplimit.HeadersLegacy | httplimit.HeadersX})
	w := serve(l, req("192.0.2.1:1", "/", "X-User", "ann"))
	// The user rule is the more constrained: 4 tokens left, full in 1 s.
	checkHeaders(t, "allowed", w, map[string]string{
		"RateLimit-Policy":      `"user";q=5;w=5, "global";q=300;w=3`,
		"RateLimit":             `"user";r=4;t=0, "global";r=299;t=0`,
		"RateLimit-Limit":       "5",
		"RateLimit-Remaining":   "4",
		"RateLimit-Reset":       "1",
		"X-RateLimit-Limit":     "5",
		"X-RateLimit-Remaining": "4",
		"X-RateLimit-Reset":     "1",
	})
	only, _ := newLimiter(t, doc, httplimit.Options{Headers: httplimit.HeadersLegacy})
	checkHeaders(t, "legacy only", serve(only, req("192.0.2.1:1", "/", "X-User", "ann")), map[string]string{
		"RateLimit-Policy": "", "RateLimit": "", "RateLimit-Remaining": "4", "X-RateLimit-Limit": "",
	})
}

// A cost above the burst can never pass: 429 without Retry-After and with
// its own reason; t is absent from its RateLimit item.
func TestCostAboveBurst(t *testing.T) {
	doc := `{"rules":[{"name":"weighted","limit_keys":["ip:address"],
	  "algorithm_config":{"rps":10,"burst":20,"cost_source":"header:x-weight"}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{})
	w := serve(l, req("192.0.2.1:1", "/", "X-Weight", "21"))
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", w.Code)
	}
	checkHeaders(t, "never", w, map[string]string{
		"Retry-After":          "",
		httplimit.ReasonHeader: "cost_exceeds_burst",
		"RateLimit":            `"weighted";r=20`,
	})
	if !strings.Contains(w.Body.String(), "can never be admitted") {
		t.Errorf("body %q does not say the request can never pass", w.Body.String())
	}
}

// Retry-After = ceil(wait) + jitter, the jitter in [0, wait/2], the same for
// one client every time, different between clients, never below t.
func TestRetryAfterJitter(t *testing.T) {
	doc := `{"rules":[{"name":"slow","limit_keys":["ip:address"],"algorithm_config":{"rps":0.1,"burst":1}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{JitterSeed: 42})
	seen := map[int64]bool{}
	for i := range 64 {
		ip := fmt.Sprintf("198.51.100.%d:1", i)
		serve(l, req(ip, "/"))
		first := serve(l, req(ip, "/"))
		again := serve(l, req(ip, "/"))
		ra, err := strconv.ParseInt(first.Header().Get("Retry-After"), 10, 64)
		if err != nil {
			t.Fatalf("client %d: Retry-After %q", i, first.Header().Get("Retry-After"))
		}
		if ra < 10 || ra > 15 {
			t.Errorf("client %d: Retry-After %d outside [10, 15] (wait 10 s + up to 50 %%)", i, ra)
		}
		if again.Header().Get("Retry-After") != first.Header().Get("Retry-After") {
			t.Errorf("client %d: Retry-After %s then %s, want the same", i, first.Header().Get("Retry-After"), again.Header().Get("Retry-After"))
		}
		if tt := first.Header().Get("RateLimit"); tt != `"slow";r=0;t=10` {
			t.Errorf("client %d: RateLimit %q, want t=10 (<= Retry-After)", i, tt)
		}
		seen[ra] = true
	}
	if len(seen) < 4 {
		t.Errorf("64 clients got only %d distinct Retry-After values: %v", len(seen), seen)
	}
	// Another seed moves the values.
	other, _ := newLimiter(t, doc, httplimit.Options{JitterSeed: 43})
	moved := 0
	for i := range 64 {
		ip := fmt.Sprintf("198.51.100.%d:1", i)
		serve(other, req(ip, "/"))
		a := serve(other, req(ip, "/")).Header().Get("Retry-After")
		serve(l, req(ip, "/"))
		if b := serve(l, req(ip, "/")).Header().Get("Retry-After"); a != b {
			moved++
		}
	}
	if moved == 0 {
		t.Error("JitterSeed changes no client's Retry-After")
	}
}

// A Result that a caller builds or decodes (the check API's JSON) holds no
// hidden state: writing its headers and problem works as for Check's own.
func TestDecodedResultWritesLikeCheck(t *testing.T) {
	l, _ := newLimiter(t, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":1,"burst":2}}]}`, httplimit.Options{})
	var res httplimit.Result
	for range 3 {
		res = l.Check(req("192.0.2.1:1", "/"))
	}
	if res.Allowed {
		t.Fatalf("third request admitted: %+v", res)
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var decoded httplimit.Result
	if err := json.Unmarshal(data, &decoded); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		res  httplimit.Result
	}{{"decoded", decoded}, {"built", httplimit.Result{Status: 429, DeniedBy: "x", Reason: httplimit.ReasonExceeded, RetryAfter: 3}}} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		if tc.name == "decoded" {
			res.WriteProblem(want)
		}
		tc.res.WriteProblem(got)
		if got.Code != 429 || got.Header().Get("Retry-After") != "3" && tc.name == "built" {
			t.Errorf("%s: %d %v", tc.name, got.Code, got.Header())
		}
		if tc.name == "decoded" && (got.Body.String() != want.Body.String() || fmt.Sprint(got.Header()) != fmt.Sprint(want.Header())) {
			t.Errorf("decoded Result writes\n%v %s\nCheck's writes\n%v %s", got.Header(), got.Body, want.Header(), want.Body)
		}
	}
}

// A shadow rule denies nothing, so it has no place in the fields a client
// backs off by: with the example rules every response carried
// `"per-ip";r=0;t=1` of a shadow rule once its bucket was empty, and the
// shadow reason header. They show only with HeadersShadow.
func TestShadowRulesLeftOutOfHeaders(t *testing.T) {
	doc := `{"rules":[
	 {"name":"trial","limit_keys":["ip:address"],"mode":"shadow","algorithm_config":{"rps":1,"burst":1}},
	 {"name":"per-path","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":100}}]}`
	shadowOnly := `{"rules":[{"name":"trial","limit_keys":["ip:address"],"mode":"shadow","algorithm_config":{"rps":1,"burst":1}}]}`
	for _, tt := range []struct {
		name string
		doc  string
		set  httplimit.HeaderSet
		want map[string]string // after the second request, which the shadow rule would deny
	}{
		{"default", doc, 0, map[string]string{
			"RateLimit-Policy": `"per-path";q=100;w=100`, "RateLimit": `"per-path";r=98;t=0`, httplimit.ReasonHeader: ""}},
		{"legacy", doc, httplimit.HeadersDraft | httplimit.HeadersLegacy | httplimit.HeadersX, map[string]string{
			"RateLimit-Policy": `"per-path";q=100;w=100`, "RateLimit-Limit": "100", "X-RateLimit-Remaining": "98", httplimit.ReasonHeader: ""}},
		{"shadow only", shadowOnly, httplimit.HeadersDraft | httplimit.HeadersLegacy, map[string]string{
			"RateLimit-Policy": "", "RateLimit": "", "RateLimit-Limit": "", httplimit.ReasonHeader: ""}},
		{"opted in", doc, httplimit.HeadersShadow | httplimit.HeadersDraft | httplimit.HeadersLegacy, map[string]string{
			"RateLimit-Policy": `"trial";q=1;w=1, "per-path";q=100;w=100`, "RateLimit": `"trial";r=0;t=1, "per-path";r=98;t=0`,
			"RateLimit-Limit": "100", httplimit.ReasonHeader: "shadow_token_bucket_exceeded"}},
	} {
		l, _ := newLimiter(t, tt.doc, httplimit.Options{Headers: tt.set})
		serve(l, req("192.0.2.1:1", "/"))
		w := serve(l, req("192.0.2.1:1", "/"))
		if w.Code != 200 {
			t.Errorf("%s: %d, want 200", tt.name, w.Code)
		}
		checkHeaders(t, tt.name, w, tt.want)
		if st := l.Stats()[0]; st.ShadowDenied != 1 {
			t.Errorf("%s: stats %+v, want the would-be denial counted", tt.name, st)
		}
		// Check, the check API and WriteHeaders on a Result follow the
		// same set.
		h := http.Header{}
		res := l.Check(req("192.0.2.1:1", "/"))
		res.WriteHeaders(h)
		if got, want := strings.Contains(h.Get("RateLimit-Policy"), "trial"), tt.set&httplimit.HeadersShadow != 0; got != want {
			t.Errorf("%s: Check's RateLimit-Policy %q", tt.name, h.Get("RateLimit-Policy"))
		}
		cw := httptest.NewRecorder()
		l.CheckHandler().ServeHTTP(cw, httptest.NewRequest("POST", "/", strings.NewReader(`{"ip":"192.0.2.1"}`)))
		var out httplimit.CheckResponse
		json.Unmarshal(cw.Body.Bytes(), &out)
		if got, want := strings.Contains(out.Headers["RateLimit"], "trial"), tt.set&httplimit.HeadersShadow != 0; got != want {
			t.Errorf("%s: the check API's headers %q", tt.name, out.Headers)
		}
		if len(out.Policies) == 0 || out.Policies[0].Name != "trial" {
			t.Errorf("%s: the check API's policies %+v, want the shadow rule's (for the caller)", tt.name, out.Policies)
		}
	}
}

// "1 tokens per second" read wrong in every 429 of a rule of rate 1.
func TestProblemDetailCountsTokens(t *testing.T) {
	for _, tt := range []struct {
		rate, burst float64
		want        string
	}{
		{1, 1, `Rule "r" allows 1 token per second with bursts of 1; retry after`},
		{0.5, 1, `Rule "r" allows 0.5 tokens per second with bursts of 1; retry after`},
		{2, 2, `Rule "r" allows 2 tokens per second with bursts of 2; retry after`},
	} {
		l, _ := newRuleLimiter(t, httplimit.Options{}, httplimit.Rule{Name: "r", LimitKeys: []string{"global"}, Rate: tt.rate, Burst: tt.burst})
		var w *httptest.ResponseRecorder
		for range 3 {
			w = serve(l, req("192.0.2.1:1", "/"))
		}
		var p httplimit.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 429 || !strings.HasPrefix(p.Detail, tt.want) {
			t.Errorf("rate %v: %d %q, want %q...", tt.rate, w.Code, p.Detail, tt.want)
		}
	}
}
