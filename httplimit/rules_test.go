package httplimit_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

func TestCostSources(t *testing.T) {
	doc := `{"rules":[
	 {"name":"h","limit_keys":["path"],"match":{"path":"/h"},"algorithm_config":{"rps":1,"burst":100,"cost_source":"header:X-Weight","default_cost":2}},
	 {"name":"q","limit_keys":["path"],"match":{"path":"/q"},"algorithm_config":{"rps":1,"burst":100,"cost_source":"query:w","default_cost":3}},
	 {"name":"f","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":100,"fixed_cost":7}}]}`
	for _, tt := range []struct {
		target  string
		headers []string
		want    string // RateLimit after one request from a full bucket
	}{
		{"/h", []string{"X-Weight", "5"}, `"h";r=95;t=0`},
		{"/h", []string{"X-Weight", "0.5"}, `"h";r=99;t=0`},
		{"/h", []string{"X-Weight", "0"}, `"h";r=100;t=0`},
		{"/h", nil, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "abc"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "-1"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "+5"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "1e1"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "0x10"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "NaN"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "Inf"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "5."}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", ".5"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "5,5"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "1", "X-Weight", "1"}, `"h";r=98;t=0`},
		{"/q?w=4", nil, `"q";r=96;t=0`},
		{"/q?w=four", nil, `"q";r=97;t=0`},
		{"/q?w=1&w=1", nil, `"q";r=97;t=0`},
		{"/f", []string{"X-Weight", "50"}, `"f";r=93;t=0`},
	} {
		l, _ := newLimiter(t, doc, httplimit.Options{})
		w := serve(l, req("192.0.2.1:1", tt.target, tt.headers...))
		if got := w.Header().Get("RateLimit"); got != tt.want || w.Code != 200 {
			t.Errorf("%s %q: %d %s, want 200 %s", tt.target, tt.headers, w.Code, got, tt.want)
		}
	}
	l, _ := newLimiter(t, doc, httplimit.Options{})
	w := serve(l, req("192.0.2.1:1", "/h", "X-Weight", "99999999999999999999999999999999999999999999999999999999999"+strings.Repeat("9", 400)))
	if w.Code != 429 || w.Header().Get(httplimit.ReasonHeader) != "cost_exceeds_burst" {
		t.Errorf("a decimal beyond float64: %d %q, want 429 cost_exceeds_burst", w.Code, w.Header().Get(httplimit.ReasonHeader))
	}
}

func TestShadowModeNeverDenies(t *testing.T) {
	doc := `{"rules":[
	 {"name":"trial","limit_keys":["ip:address"],"mode":"shadow","algorithm_config":{"rps":1,"burst":2}},
	 {"name":"per-path","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":100}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{})
	for i := range 5 {
		w := serve(l, req("192.0.2.1:1", "/"))
		if w.Code != 200 {
			t.Fatalf("request %d: %d, want 200 (shadow never denies)", i, w.Code)
		}
		wantReason := ""
		if i >= 2 {
			wantReason = "shadow_token_bucket_exceeded"
		}
		checkHeaders(t, "shadow", w, map[string]string{
			httplimit.ReasonHeader: wantReason,
			"RateLimit-Policy":     `"trial";q=2;w=2, "per-path";q=100;w=100`,
			"Retry-After":          "",
		})
	}
	st := l.Stats()
	if st[0].Allowed != 2 || st[0].ShadowDenied != 3 || st[0].Denied != 0 || st[1].Allowed != 5 {
		t.Errorf("stats %+v, want trial 2 allowed 3 shadow-denied, per-path 5 allowed", st)
	}
}

// The seed's tiers: enterprise keys by JWT plan, the free rule catching the
// rest; on unverified claims, which TestTiers is about (jwt_test.go has
// the verified ones).
const tiersDoc = `{
  "rules": [
    {
      "name": "enterprise",
      "limit_keys": ["header:x-api-key"],
      "algorithm": "token_bucket",
      "algorithm_config": { "rps": 1000, "burst": 2000 },
      "match": { "jwt:plan": "enterprise" },
      "insecure_unverified_jwt": true
    },
    {
      "name": "free",
      "limit_keys": ["header:x-api-key"],
      "algorithm": "token_bucket",
      "algorithm_config": { "rps": 10, "burst": 20 }
    }
  ]
}`

func bearer(claims map[string]any) string {
	b, _ := json.Marshal(claims)
	return "Bearer eyJhbGciOiJIUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(b) + ".c2ln"
}

func TestTiers(t *testing.T) {
	l, _ := newLimiter(t, tiersDoc, httplimit.Options{})
	ent := serve(l, req("192.0.2.1:1", "/", "X-Api-Key", "k1", "Authorization", bearer(map[string]any{"plan": "enterprise"})))
	checkHeaders(t, "enterprise", ent, map[string]string{"RateLimit": `"enterprise";r=1999;t=0`})
	free := serve(l, req("192.0.2.1:1", "/", "X-Api-Key", "k2", "Authorization", bearer(map[string]any{"plan": "free"})))
	checkHeaders(t, "free plan", free, map[string]string{"RateLimit": `"free";r=19;t=0`})
	anon := serve(l, req("192.0.2.1:1", "/", "X-Api-Key", "k3"))
	checkHeaders(t, "no token", anon, map[string]string{"RateLimit": `"free";r=19;t=0`})
	forged := serve(l, req("192.0.2.1:1", "/", "X-Api-Key", "k4", "Authorization", "Bearer not.a-jwt!.x"))
	checkHeaders(t, "undecodable token", forged, map[string]string{"RateLimit": `"free";r=19;t=0`})
	// Requests without the key share the empty key's bucket.
	serve(l, req("192.0.2.1:1", "/"))
	checkHeaders(t, "no api key", serve(l, req("192.0.2.9:1", "/")), map[string]string{"RateLimit": `"free";r=18;t=0`})
	// Numeric claims compare as JSON text.
	num, _ := newLimiter(t, strings.Replace(tiersDoc, `"enterprise" }`, `"3" }`, 1), httplimit.Options{})
	checkHeaders(t, "numeric claim", serve(num, req("192.0.2.1:1", "/", "X-Api-Key", "k", "Authorization", bearer(map[string]any{"plan": 3}))),
		map[string]string{"RateLimit": `"enterprise";r=1999;t=0`})
}

// Hierarchy: per-user and global must both pass; whichever denies, the other
// is not charged.
func TestHierarchyRefunds(t *testing.T) {
	doc := `{"rules":[
	 {"name":"user","limit_keys":["jwt:sub"],"algorithm_config":{"rps":1,"burst":3},"insecure_unverified_jwt":true},
	 {"name":"global","limit_keys":["method"],"match":{"method":["GET","POST"]},"algorithm_config":{"rps":1,"burst":5}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{})
	as := func(sub string) *http.Request {
		return req("192.0.2.1:1", "/", "Authorization", bearer(map[string]any{"sub": sub}))
	}
	for range 3 {
		serve(l, as("ann"))
	}
	w := serve(l, as("ann"))
	checkHeaders(t, "user denies", w, map[string]string{"RateLimit": `"user";r=0;t=1, "global";r=2;t=0`})
	if w.Code != 429 {
		t.Fatalf("ann's 4th: %d", w.Code)
	}
	serve(l, as("bob"))
	serve(l, as("bob"))
	w = serve(l, as("cy"))
	checkHeaders(t, "global denies", w, map[string]string{"RateLimit": `"user";r=3;t=0, "global";r=0;t=1`})
	if w.Code != 429 || !strings.Contains(w.Body.String(), `"violated-policies":["global"]`) {
		t.Errorf("cy: %d %s, want 429 by global", w.Code, w.Body.String())
	}
	st := l.Stats()
	if st[0].Denied != 1 || st[1].Denied != 1 || st[0].Allowed != 5 || st[1].Allowed != 5 {
		t.Errorf("stats %+v", st)
	}
}

func TestReloadKeepsUnchangedBuckets(t *testing.T) {
	l, _ := newLimiter(t, perIP, httplimit.Options{})
	for range 20 {
		serve(l, req("192.0.2.1:1", "/"))
	}
	more, _ := httplimit.ParseRules([]byte(`{"rules":[
	 {"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":10,"burst":20},"mode":"enforce"},
	 {"name":"per-path","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":9}}]}`))
	if err := l.Reload(more); err != nil {
		t.Fatal(err)
	}
	w := serve(l, req("192.0.2.1:1", "/"))
	checkHeaders(t, "after reload", w, map[string]string{"RateLimit": `"per-ip";r=0;t=1, "per-path";r=9;t=0`})
	if w.Code != 429 {
		t.Errorf("drained client after a reload: %d, want 429", w.Code)
	}
	if st := l.Stats(); st[0].Allowed != 20 || st[0].Denied != 1 {
		t.Errorf("counters after reload: %+v, want 20 allowed and 1 denied kept", st[0])
	}
	changed, _ := httplimit.ParseRules([]byte(`{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":10,"burst":30}}]}`))
	if err := l.Reload(changed); err != nil {
		t.Fatal(err)
	}
	checkHeaders(t, "changed burst", serve(l, req("192.0.2.1:1", "/")), map[string]string{"RateLimit": `"per-ip";r=29;t=0`})
	bad := []httplimit.Rule{{Name: "x", LimitKeys: []string{"bogus"}, Rate: 1, Burst: 1}}
	if err := l.Reload(bad); err == nil {
		t.Fatal("Reload of a bad rule set succeeded")
	}
	checkHeaders(t, "after a failed reload", serve(l, req("192.0.2.1:1", "/")), map[string]string{"RateLimit": `"per-ip";r=28;t=0`})
	if got := l.Rules(); len(got) != 1 || got[0].Burst != 30 {
		t.Errorf("Rules() = %+v", got)
	}
}

func TestValidationReportsEveryProblem(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		want      []string
	}{
		{"not json", `{"rules":[`, []string{"document is empty or truncated"}},
		{"trailing", perIP + ` {}`, []string{"unexpected data after the top-level value"}},
		{"bom", "\xef\xbb\xbf" + perIP, []string{"byte order mark"}},
		{"too big", `{"rules":[` + strings.Repeat(" ", 1<<20) + `]}`, []string{"more than the limit"}},
		{"deep", strings.Repeat("[", 40) + strings.Repeat("]", 40), []string{"nested deeper than 16"}},
		{"top-level", `[]`, []string{`must be an object with a "rules" list`}},
		{"empty", `{"rules":[]}`, []string{"rules: at least one rule is required"}},
		{"unknown top field", `{"rules":[],"version":1}`, []string{`version: unknown field`}},
		{"everything wrong", `{"rules":[
		  {"name":"a","limit_keys":["ip:address","cookie:x","header:bad header","ip:address"],"algorithm":"leaky_bucket",
		   "algorithm_config":{"rps":10,"tokens_per_second":10,"burst":5,"cost_source":"body","fixed_cost":-1,"default_cost":0,"window":1},
		   "match":{"host":"x","path":"noslash","method":[]},"mode":"audit","fail_mode":"maybe","priority":1},
		  {"name":"a","limit_keys":["path"],"algorithm_config":{"rps":"fast","burst":1e400}},
		  {"limit_keys":"path","algorithm_config":{"rps":1,"burst":1.0005}},
		  {"name":"b","limit_keys":["method"],"algorithm_config":{"rps":0,"burst":2e9}},
		  {"name":"c","limit_keys":["method"],"algorithm_config":{"rps":1,"burst":2,"rps":3}},
		  {"name":"d\u0007","limit_keys":[],"algorithm_config":{"burst":2}},
		  {"name":"e","limit_keys":["jwt:"],"algorithm_config":{"rps":0.0001,"burst":4000}},
		  {"name":"f","limit_keys":["query:"],"algorithm_config":{"rps":1,"burst":5,"fixed_cost":6}},
		  "rule"
		]}`, []string{
			`rule "a" (rules[0]): limit_keys[1]: unknown limit key "cookie:x"`,
			`rule "a" (rules[0]): limit_keys[2]: header name must be a non-empty HTTP token`,
			`rule "a" (rules[0]): limit_keys[3]: duplicate limit key "ip:address"`,
			`rule "a" (rules[0]): algorithm: must be "token_bucket", got "leaky_bucket"`,
			`rule "a" (rules[0]): algorithm_config.rps: give tokens_per_second or its alias rps, not both`,
			`rule "a" (rules[0]): algorithm_config.burst: must be at least the rate (10), got 5`,
			`rule "a" (rules[0]): algorithm_config.cost_source: must be "fixed", "header:<name>" or "query:<name>", got "body"`,
			`rule "a" (rules[0]): algorithm_config.fixed_cost: must be a positive number, got -1`,
			`rule "a" (rules[0]): algorithm_config.default_cost: must be a positive number, got 0`,
			`rule "a" (rules[0]): algorithm_config.window: unknown field`,
			`rule "a" (rules[0]): match: unknown match key "host"`,
			`rule "a" (rules[0]): match.path: must start with "/", got "noslash"`,
			`rule "a" (rules[0]): match.method: must list at least one value`,
			`rule "a" (rules[0]): mode: must be "enforce" or "shadow", got "audit"`,
			`rule "a" (rules[0]): fail_mode: must be "open" or "closed", got "maybe"`,
			`rule "a" (rules[0]): priority: unknown field`,
			`rule "a" (rules[1]): algorithm_config.rps: must be a number, got a string`,
			`rule "a" (rules[1]): algorithm_config.burst: number 1e400 is out of range`,
			`rule "a" (rules[1]): name: duplicate name: rules[0] has it too`,
			`rules[2]: name: required`,
			`rules[2]: limit_keys: must be a list of strings, got a string`,
			`rules[2]: algorithm_config.burst: must be a multiple of 0.001 tokens, got 1.0005`,
			`rule "b" (rules[3]): algorithm_config.rps: must be between 1/86400 (one token a day) and 1e9 tokens per second, got 0`,
			`rule "b" (rules[3]): algorithm_config.burst: must be between 1 and 1e9 tokens, got 2e+09`,
			`algorithm_config.rps: duplicate key`,
			`rule "c" (rules[4]): match: the rule can never apply: rule "b" (rules[3]) has the same limit_keys, comes first and has no match`,
			`(rules[5]): name: must be printable ASCII`,
			`(rules[5]): limit_keys: required: a non-empty list`,
			`(rules[5]): algorithm_config.tokens_per_second: required`,
			`rule "e" (rules[6]): limit_keys[0]: JWT claim name must not be empty`,
			`rule "e" (rules[6]): algorithm_config.burst: burst/rate, the time to refill an empty bucket, must be at most 366 days`,
			`rule "f" (rules[7]): limit_keys[0]: query parameter name must not be empty`,
			`rule "f" (rules[7]): algorithm_config.fixed_cost: must be at most the burst (5)`,
			`rules[8]: a rule must be an object, got a string`,
		}},
	} {
		t.Run("case="+tt.name, func(t *testing.T) {
			_, err := httplimit.ParseRules([]byte(tt.doc))
			var ce *httplimit.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("missing %q in:\n%s", w, msg)
				}
			}
			if len(tt.want) > 5 && len(ce.Problems) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%s", len(ce.Problems), len(tt.want), msg)
			}
		})
	}
}

// Rules built in Go get the same checks as parsed ones.
func TestNewValidatesGoRules(t *testing.T) {
	_, err := httplimit.New([]httplimit.Rule{
		{Name: "ok", LimitKeys: []string{"ip:address"}, Rate: 1, Burst: 1},
		{Name: "tier", LimitKeys: []string{"ip:address"}, Rate: 1, Burst: 1},
	}, httplimit.Options{})
	if err == nil || !strings.Contains(err.Error(), `rule "tier" (rules[1]): match: the rule can never apply`) {
		t.Errorf("New: %v", err)
	}
}

// Limit keys are a set: reordering them on reload keeps the buckets, and
// composite keys never collide across values.
func TestCompositeKeysReorderedOnReload(t *testing.T) {
	doc := `{"rules":[{"name":"pair","limit_keys":["header:x-a","ip:address"],"algorithm_config":{"rps":1,"burst":2}}]}`
	l, _ := newLimiter(t, doc, httplimit.Options{})
	serve(l, req("192.0.2.1:1", "/", "X-A", "1"))
	serve(l, req("192.0.2.1:1", "/", "X-A", "1"))
	rules, _ := httplimit.ParseRules([]byte(strings.Replace(doc, `"header:x-a","ip:address"`, `"ip:address","header:X-A"`, 1)))
	if err := l.Reload(rules); err != nil {
		t.Fatal(err)
	}
	if w := serve(l, req("192.0.2.1:1", "/", "X-A", "1")); w.Code != 429 {
		t.Errorf("after reordering limit_keys: %d, want the drained bucket (429)", w.Code)
	}
	if w := serve(l, req("192.0.2.1:1", "/", "X-A", "12")); w.Code != 200 {
		t.Errorf("another header value: %d, want its own bucket", w.Code)
	}
}
