package httplimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// apiSpellings all name /api/x to a server that resolves dot segments,
// merges slashes and decodes unreserved escapes, as nginx and most
// frameworks do.
var apiSpellings = []string{"/api/x", "//api/x", "/./api/x", "/x/../api/x", "/%2e/api/x", "/%2E%2E/api/x",
	"///api/x", "/api/../api/x", "/.//api/x", "/z/%2e%2e/api/x", "/%61pi/x", "/api//x", "/api/./x", "/../api/x"}

// Every spelling of a path takes from the rule's one bucket, and the next
// handler gets the path the rules judged; one that has no canonical form is
// a 400 that takes nothing.
func TestHandlerCanonicalPaths(t *testing.T) {
	l, _ := newLimiter(t, `{"rules":[{"name":"api","limit_keys":["global"],"match":{"path_prefix":["/api/"]},"algorithm_config":{"rps":0.001,"burst":3}}]}`, httplimit.Options{})
	var seen []string
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.EscapedPath())
	}))
	codes := map[int]int{}
	for _, p := range apiSpellings {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req("192.0.2.1:1", p))
		codes[w.Code]++
	}
	if codes[200] != 3 || codes[429] != len(apiSpellings)-3 {
		t.Errorf("statuses %v, want 3 × 200 and the rest 429", codes)
	}
	for _, p := range seen {
		if p != "/api/x" {
			t.Errorf("next got %q, want /api/x", p)
		}
	}
	// A byte Go's url does not keep raw (| { ^ ...) must not make it
	// re-escape the decoded path, where %2F has become "/".
	refused := []string{"/%2fapi/x", "/api%2Fx", `/api\x`, "/api;x/y", "/api/x%00", "/api%2Fx|", "/a/..%2F..%2Fapi|/x",
		"/api%5Cx{", "/api%2Fx\"", "/api%2F\xc3\xa9"}
	for _, p := range refused {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req("192.0.2.1:1", p))
		var prob httplimit.Problem
		json.Unmarshal(w.Body.Bytes(), &prob)
		if w.Code != 400 || prob.Reason != httplimit.ReasonInvalidPath || !strings.Contains(prob.Detail, "The request path holds") {
			t.Errorf("%s: %d %s, want 400 with a problem naming the path's fault", p, w.Code, w.Body)
		}
	}
	// The opaque form (GET http:x) names no path.
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req("192.0.2.1:1", "http:api%2Fx"))
	if w.Code != 400 {
		t.Errorf("http:api%%2Fx: %d %s, want 400", w.Code, w.Body)
	}
	if len(seen) != 3 {
		t.Errorf("next ran %d times, want 3", len(seen))
	}
	if n := l.InvalidPaths(); n != uint64(len(refused)+1) {
		t.Errorf("InvalidPaths() = %d, want %d", n, len(refused)+1)
	}
}

// A rule keyed on the path gives every spelling of one path one bucket.
func TestPathKeyIsCanonical(t *testing.T) {
	l, _ := newLimiter(t, `{"rules":[{"name":"per-path","limit_keys":["path"],"algorithm_config":{"rps":0.001,"burst":1}}]}`, httplimit.Options{})
	admitted := 0
	for _, p := range []string{"/items", "//items", "/./items", "/%69tems", "/x/../items", "/items/."} {
		if l.Check(req("192.0.2.1:1", p)).Allowed {
			admitted++
		}
	}
	// "/items/." is "/items/": another path, as RFC 3986 has it.
	if admitted != 2 {
		t.Errorf("%d admitted, want 2 (/items and /items/)", admitted)
	}
}

// The path options reach the rules: with FoldCase and TrimTrailingSlash,
// /Items/ and /items are one bucket.
func TestPathOptions(t *testing.T) {
	l, _ := newLimiter(t, `{"rules":[{"name":"per-path","limit_keys":["path"],"algorithm_config":{"rps":0.001,"burst":1}}]}`,
		httplimit.Options{Paths: httplimit.PathOptions{FoldCase: true, TrimTrailingSlash: true, KeepEncodedSlashes: true, AllowSemicolons: true}})
	if !l.Check(req("192.0.2.1:1", "/Items/")).Allowed {
		t.Fatal("first request denied")
	}
	if res := l.Check(req("192.0.2.1:1", "/items")); res.Allowed || res.Policies[0].Key != "/items" {
		t.Errorf("/items after /Items/: allowed %v, key %q; want denied under /items", res.Allowed, res.Policies[0].Key)
	}
	for _, p := range []string{"/a%2Fb", "/a;b"} {
		if res := l.Check(req("192.0.2.1:1", p)); res.Status == 400 {
			t.Errorf("%s refused (%s) though the options allow it", p, res.Detail)
		}
	}
}

// The check API canonicalises the path it is given, and names the field of
// one it cannot.
func TestCheckAPICanonicalPath(t *testing.T) {
	l, _ := newLimiter(t, `{"rules":[{"name":"api","limit_keys":["path"],"match":{"path_prefix":["/api/"]},"algorithm_config":{"rps":0.001,"burst":1}}]}`, httplimit.Options{})
	h := l.CheckHandler()
	post := func(body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body)))
		return w
	}
	allowed := 0
	for _, p := range []string{"/api/x", "//api/x", "/%61pi/./x"} {
		w := post(`{"path":"` + p + `"}`)
		var out httplimit.CheckResponse
		json.Unmarshal(w.Body.Bytes(), &out)
		if w.Code != 200 || len(out.Policies) != 1 || out.Policies[0].Key != "/api/x" {
			t.Errorf("%s: %d %s, want a decision keyed /api/x", p, w.Code, w.Body)
		}
		if out.Allowed {
			allowed++
		}
	}
	if allowed != 1 {
		t.Errorf("%d allowed, want 1", allowed)
	}
	if w := post(`{"path":"/api%2fx"}`); w.Code != 400 || !strings.Contains(w.Body.String(), `path: \"/api%2fx\" holds an encoded slash`) {
		t.Errorf("encoded slash: %d %s, want 400 naming the path", w.Code, w.Body)
	}
	// A request target passed whole is refused: its query, read as part
	// of the path, would take a bucket of its own.
	for _, p := range []string{"/api/x?a=1", "/api/x#", "/api/y?"} {
		if w := post(`{"path":"` + p + `"}`); w.Code != 400 || !strings.Contains(w.Body.String(), `path: \"`+p+`\" holds a`) {
			t.Errorf("%s: %d %s, want 400 naming the path", p, w.Code, w.Body)
		}
	}
	if w := post(`{"path":"/api/y%3F%23"}`); w.Code != 200 {
		t.Errorf("escaped ? and #: %d %s, want 200", w.Code, w.Body)
	}
}

// A match value that no canonical path can have is refused, naming it:
// the rule would otherwise never apply.
func TestNonCanonicalMatchValuesRefused(t *testing.T) {
	rule := func(k, v string) []httplimit.Rule {
		return []httplimit.Rule{{Name: "r", LimitKeys: []string{"global"}, Rate: 1, Burst: 1, Match: map[string][]string{k: {v}}}}
	}
	for _, tc := range []struct {
		key, value string
		opts       httplimit.PathOptions
		ok         bool
	}{
		{"path", "/api/x", httplimit.PathOptions{}, true},
		{"path", "/api/x/", httplimit.PathOptions{}, true},
		{"path", "/a b/100%", httplimit.PathOptions{}, true},
		{"path", "/api//x", httplimit.PathOptions{}, false},
		{"path", "/api/./x", httplimit.PathOptions{}, false},
		{"path", "/a;b", httplimit.PathOptions{}, false},
		{"path", "/a;b", httplimit.PathOptions{AllowSemicolons: true}, true},
		{"path", "/API", httplimit.PathOptions{FoldCase: true}, false},
		{"path", "/api/", httplimit.PathOptions{TrimTrailingSlash: true}, false},
		{"path_prefix", "/api/", httplimit.PathOptions{}, true},
		{"path_prefix", "/api/", httplimit.PathOptions{TrimTrailingSlash: true}, true},
		{"path_prefix", "/api/.", httplimit.PathOptions{}, true}, // /api/.well-known
		{"path_prefix", "/api//", httplimit.PathOptions{}, false},
		{"path_prefix", "/api/../", httplimit.PathOptions{}, false},
		{"path_prefix", `/a\`, httplimit.PathOptions{}, false},
		{"path_prefix", "/Api/", httplimit.PathOptions{FoldCase: true}, false},
	} {
		err := httplimit.Validate(rule(tc.key, tc.value), httplimit.Options{Paths: tc.opts})
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), "match."+tc.key) {
			t.Errorf("%s %q under %+v: %v, want ok %v", tc.key, tc.value, tc.opts, err, tc.ok)
		}
	}
}
