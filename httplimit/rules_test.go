package httplimit_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// A cost the client sends is a plain decimal or nothing: "+5", "1e1",
// "0x10" and " 5" are numbers to other parsers (strconv.Atoi, JavaScript's
// Number, PHP), so an application behind the limiter could charge 16 for
// what the limiter took as default_cost: they are refused, as two values
// are.
func TestCostSources(t *testing.T) {
	doc := `{"rules":[
	 {"name":"h","limit_keys":["path"],"match":{"path":"/h"},"algorithm_config":{"rps":1,"burst":100,"cost_source":"header:X-Weight","default_cost":2}},
	 {"name":"q","limit_keys":["path"],"match":{"path":"/q"},"algorithm_config":{"rps":1,"burst":100,"cost_source":"query:w","default_cost":3}},
	 {"name":"f","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":100,"fixed_cost":7}}]}`
	for _, tt := range []struct {
		target  string
		headers []string
		want    string // RateLimit after one request from a full bucket, or the reason of a 400
	}{
		{"/h", []string{"X-Weight", "5"}, `"h";r=95;t=0`},
		// Below min_cost, which defaults to default_cost: clamped to it.
		{"/h", []string{"X-Weight", "0.5"}, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "0"}, `"h";r=98;t=0`},
		{"/h", nil, `"h";r=98;t=0`},
		{"/h", []string{"X-Weight", "abc"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "-1"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "+5"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "+50"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "1e1"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "5e1"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "0x10"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "0x32"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "NaN"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "Inf"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "5."}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", ".5"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", ""}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "5_0"}, httplimit.ReasonInvalidCost},
		{"/h", []string{"X-Weight", "5,5"}, httplimit.ReasonAmbiguousValue},
		{"/h", []string{"X-Weight", "1", "X-Weight", "1"}, httplimit.ReasonAmbiguousValue},
		{"/h", []string{"X_Weight", "50"}, httplimit.ReasonAmbiguousValue},
		{"/q?w=4", nil, `"q";r=96;t=0`},
		{"/q?w=four", nil, httplimit.ReasonInvalidCost},
		{"/q?w=%2B50", nil, httplimit.ReasonInvalidCost},
		{"/q?w=+5", nil, httplimit.ReasonInvalidCost}, // " 5"
		{"/q?w=1&w=1", nil, httplimit.ReasonAmbiguousValue},
		{"/q?W=50", nil, httplimit.ReasonAmbiguousValue},
		{"/f", []string{"X-Weight", "50"}, `"f";r=93;t=0`},
	} {
		l, _ := newLimiter(t, doc, httplimit.Options{})
		w := serve(l, req("192.0.2.1:1", tt.target, tt.headers...))
		if !strings.HasPrefix(tt.want, `"`) {
			var p httplimit.Problem
			err := json.Unmarshal(w.Body.Bytes(), &p)
			if w.Code != 400 || err != nil || p.Reason != tt.want || w.Header().Get(httplimit.ReasonHeader) != tt.want {
				t.Errorf("%s %q: %d %s, want 400 %s", tt.target, tt.headers, w.Code, w.Body, tt.want)
			}
			if st := l.Stats(); st[0].Refused+st[1].Refused != 1 {
				t.Errorf("%s %q: stats %+v, want one refusal", tt.target, tt.headers, st)
			}
			continue
		}
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

// A client-chosen cost cannot undercut the rule, where "0" would be a free
// pass and "0.001" would stretch the quota a thousandfold: min_cost
// (default: default_cost) and max_cost clamp the value, or refuse it with a
// 400 that takes nothing.
func TestCostBounds(t *testing.T) {
	t.Run("free pass", func(t *testing.T) {
		doc := `{"rules":[{"name":"w","limit_keys":["ip:address"],"algorithm_config":{"rps":1,"burst":5,"cost_source":"header:x-weight"}}]}`
		for _, weight := range []string{"0", "0.001", "0.0004"} {
			l, _ := newLimiter(t, doc, httplimit.Options{})
			admitted := 0
			for range 2000 {
				if serve(l, req("192.0.2.1:1", "/", "X-Weight", weight)).Code == 200 {
					admitted++
				}
			}
			if admitted > 5 {
				t.Errorf("weight %q: %d of 2000 admitted on burst 5", weight, admitted)
			}
		}
	})
	doc := `{"rules":[
	 {"name":"clamp","limit_keys":["path"],"match":{"path":"/c"},"algorithm_config":{"rps":1,"burst":100,"cost_source":"header:x-weight","min_cost":0.5,"max_cost":10}},
	 {"name":"reject","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":100,"cost_source":"query:w","default_cost":2,"max_cost":10,"cost_out_of_range":"reject"}}]}`
	for _, tt := range []struct {
		target  string
		headers []string
		code    int
		state   string // RateLimit
	}{
		{"/c", []string{"X-Weight", "0.1"}, 200, `"clamp";r=99;t=0`}, // 0.5
		{"/c", []string{"X-Weight", "0.5"}, 200, `"clamp";r=99;t=0`},
		{"/c", []string{"X-Weight", "7"}, 200, `"clamp";r=93;t=0`},
		{"/c", []string{"X-Weight", "50"}, 200, `"clamp";r=90;t=0`}, // 10
		{"/c", nil, 200, `"clamp";r=99;t=0`},                        // default_cost 1
		{"/r?w=2", nil, 200, `"reject";r=98;t=0`},
		{"/r?w=10", nil, 200, `"reject";r=90;t=0`},
		{"/r", nil, 200, `"reject";r=98;t=0`},
		{"/r?w=1.999", nil, 400, ``},
		{"/r?w=0", nil, 400, ``},
		{"/r?w=10.001", nil, 400, ``},
		{"/r?w=99999", nil, 400, ``},
	} {
		l, _ := newLimiter(t, doc, httplimit.Options{})
		w := serve(l, req("192.0.2.1:1", tt.target, tt.headers...))
		if w.Code != tt.code || w.Header().Get("RateLimit") != tt.state {
			t.Errorf("%s %q: %d %q, want %d %q", tt.target, tt.headers, w.Code, w.Header().Get("RateLimit"), tt.code, tt.state)
		}
		if tt.code != 400 {
			continue
		}
		var p httplimit.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != 400 || p.Reason != httplimit.ReasonInvalidCost ||
			!strings.Contains(p.Detail, `query parameter "w"`) || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: body %s (%v)", tt.target, w.Body, err)
		}
		// Refused: nothing was taken.
		if got := serve(l, req("192.0.2.1:1", "/r?w=2")).Header().Get("RateLimit"); got != `"reject";r=98;t=0` {
			t.Errorf("%s: the next request sees %q, want a full bucket less 2", tt.target, got)
		}
		if st := l.Stats(); st[1].Refused != 1 {
			t.Errorf("%s: stats %+v, want one refusal", tt.target, st[1])
		}
	}
}

func TestShadowModeNeverDenies(t *testing.T) {
	doc := `{"rules":[
	 {"name":"trial","limit_keys":["ip:address"],"mode":"shadow","algorithm_config":{"rps":1,"burst":2}},
	 {"name":"per-path","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":100}}]}`
	// HeadersShadow: the shadow rule's items show (TestShadowRulesLeftOutOfHeaders
	// has the default).
	l, _ := newLimiter(t, doc, httplimit.Options{Headers: httplimit.HeadersShadow})
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
	l, clk := newLimiter(t, perIP, httplimit.Options{})
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
	if st := l.Stats(); st[0].Allowed != 20 || st[0].Denied != 1 || st[0].NearLimit != 4 {
		t.Errorf("counters after reload: %+v, want 20 allowed (4 of them leaving under a fifth of the burst) and 1 denied kept", st[0])
	}
	changed, _ := httplimit.ParseRules([]byte(`{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":10,"burst":30}}]}`))
	if err := l.Reload(changed); err != nil {
		t.Fatal(err)
	}
	// A changed burst keeps the drained bucket (see reload_test.go).
	checkHeaders(t, "changed burst", serve(l, req("192.0.2.1:1", "/")),
		map[string]string{"RateLimit": `"per-ip";r=0;t=1`, "RateLimit-Policy": `"per-ip";q=30;w=3`})
	bad := []httplimit.Rule{{Name: "x", LimitKeys: []string{"bogus"}, Rate: 1, Burst: 1}}
	if err := l.Reload(bad); err == nil {
		t.Fatal("Reload of a bad rule set succeeded")
	}
	clk.Add(time.Second)
	checkHeaders(t, "after a failed reload", serve(l, req("192.0.2.1:1", "/")),
		map[string]string{"RateLimit": `"per-ip";r=9;t=0`, "RateLimit-Policy": `"per-ip";q=30;w=3`})
	if got := l.Rules(); len(got) != 1 || got[0].Burst != 30 {
		t.Errorf("Rules() = %+v", got)
	}
}

func TestValidationReportsEveryProblem(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		want      []string
	}{
		{"not json", `{"rules":[`, []string{"line 1, column 11: document is empty or truncated"}},
		{"trailing", perIP + ` {}`, []string{"unexpected data after the top-level value"}},
		{"syntax", "{\"rules\":[\n {\"name\":\"a\",\n  \"burst\": 1,,\n}]}", []string{"line 3, column 14: invalid JSON: invalid character ','"}},
		{"syntax after a multibyte name", "{\"rules\":[{\"name\":\"é\"}]]", []string{"line 1, column 24: invalid JSON"}},
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
		  "rule",
		  {"name":"g","limit_keys":["header:g"],"algorithm_config":{"rps":1,"burst":5,"fixed_cost":1e-5,"default_cost":0.0015,"min_cost":2}},
		  {"name":"h","limit_keys":["header:h"],"algorithm_config":{"rps":1,"burst":5,"cost_source":"header:w","min_cost":3,"max_cost":2,"cost_out_of_range":"drop"}},
		  {"name":"i","limit_keys":["header:i"],"algorithm_config":{"rps":1,"burst":5,"cost_source":"header:w","min_cost":2,"max_cost":6,"default_cost":1}},
		  {"name":"j","limit_keys":["header:j"],"algorithm_config":{"rps":1,"burst":5,"cost_source":"header:w","max_cost":0,"min_cost":"1"}}
		]}`, []string{
			`rule "a" (rules[0]): limit_keys[1]: unknown limit key "cookie:x"`,
			`rule "a" (rules[0]): limit_keys[2]: header name must be a non-empty HTTP token`,
			`rule "a" (rules[0]): limit_keys[3]: duplicate limit key "ip:address"`,
			`rule "a" (rules[0]): algorithm: must be "token_bucket" or "concurrency" (for a rule with one limit; its limits name their own), got "leaky_bucket"`,
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
			`rule "a" (rules[0]): fail_mode: must be "fallback", "open" or "closed", got "maybe"`,
			`rule "a" (rules[0]): priority: unknown field`,
			`rule "a" (rules[1]): algorithm_config.rps: must be a number, got a string`,
			`rule "a" (rules[1]): algorithm_config.burst: number 1e400 is out of range`,
			`rule "a" (rules[1]): name: duplicate name: rules[0] has it too`,
			`rules[2]: name: required`,
			`rules[2]: limit_keys: must be a list of strings, got a string`,
			`rules[2]: algorithm_config.burst: must be a multiple of 0.001 tokens, got 1.0005`,
			`rule "b" (rules[3]): algorithm_config.rps: must be between 1/31622400 (one token per 366 days) and 1e9 tokens per second, got 0`,
			`rule "b" (rules[3]): algorithm_config.burst: must be between 1 and 1e9 tokens, got 2e+09`,
			`rule "c" (rules[4]): algorithm_config.rps: duplicate key`,
			`rule "c" (rules[4]): match: the rule can never apply: rule "b" (rules[3]) has the same limit_keys, comes first and has no match`,
			`(rules[5]): name: must be printable ASCII`,
			`(rules[5]): limit_keys: required: a non-empty list`,
			`(rules[5]): algorithm_config.tokens_per_second: required`,
			`rule "e" (rules[6]): limit_keys[0]: JWT claim name must not be empty`,
			`rule "e" (rules[6]): algorithm_config.burst: burst/rate must be at most 366 days (31622400 s), the time to refill an empty bucket`,
			`rule "f" (rules[7]): limit_keys[0]: query parameter name must not be empty`,
			`rule "f" (rules[7]): algorithm_config.fixed_cost: must be at most the burst (5)`,
			`rules[8]: a rule must be an object, got a string`,
			`rule "g" (rules[9]): algorithm_config.fixed_cost: must be at least 0.001 tokens, the smallest cost the limiter charges, got 1e-05`,
			`rule "g" (rules[9]): algorithm_config.default_cost: must be a multiple of 0.001 tokens, got 0.0015`,
			`rule "g" (rules[9]): algorithm_config.min_cost: bounds a cost the client sends: only with cost_source "header:<name>" or "query:<name>"`,
			`rule "h" (rules[10]): algorithm_config.cost_out_of_range: must be "clamp" or "reject", got "drop"`,
			`rule "h" (rules[10]): algorithm_config.max_cost: must be at least min_cost (3), got 2`,
			`rule "i" (rules[11]): algorithm_config.max_cost: must be at most the burst (5), or no request could ever pass; got 6`,
			`rule "j" (rules[12]): algorithm_config.max_cost: must be a positive number, got 0`,
			`rule "j" (rules[12]): algorithm_config.min_cost: must be a number, got a string`,
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
			// Listed rule by rule, whatever check found them.
			if !slices.IsSortedFunc(ce.Problems, func(a, b *httplimit.FieldError) int { return a.Index - b.Index }) {
				t.Errorf("problems out of rule order:\n%s", msg)
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

// Quotas by the year: 12 a year, burst 12, is a rule like any other.
func TestYearlyQuotaRule(t *testing.T) {
	doc := `{"rules":[{"name":"yearly","limit_keys":["header:x-tenant"],"algorithm_config":{"rps":3.794778384942319e-07,"burst":12}}]}`
	l, clk := newLimiter(t, doc, httplimit.Options{})
	for i := range 12 {
		if w := serve(l, req("192.0.2.1:1", "/", "X-Tenant", "acme")); w.Code != 200 {
			t.Fatalf("request %d of the year's 12: %d", i, w.Code)
		}
	}
	w := serve(l, req("192.0.2.1:1", "/", "X-Tenant", "acme"))
	if w.Code != 429 || w.Header().Get("RateLimit-Policy") != `"yearly";q=12;w=31622400` {
		t.Errorf("the 13th: %d, policy %q", w.Code, w.Header().Get("RateLimit-Policy"))
	}
	clk.Add(31622400*time.Second/12 + time.Second)
	if w := serve(l, req("192.0.2.1:1", "/", "X-Tenant", "acme")); w.Code != 200 {
		t.Errorf("a month later: %d, want the month's token", w.Code)
	}
}
