package httplimit_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// twoLimits is one rule per API key with 10 a second (burst 10) and 100 a
// day, decided together.
const twoLimits = `{"rules":[{"name":"api-key","limit_keys":["header:x-api-key"],"limits":[
	{"name":"api-key-second","tokens_per_second":10,"burst":10},
	{"name":"api-key-day","rps":0.0011574074074074073,"burst":100}]}]}`

// policyOf is the policy named name in res, failing t without one.
func policyOf(t *testing.T, res httplimit.Result, name string) httplimit.Policy {
	t.Helper()
	for _, p := range res.Policies {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no policy %q in %+v", name, res.Policies)
	return httplimit.Policy{}
}

// A request takes its cost from every limit of its rule or from none: the
// per-second limit denies the 11th request of a second and the day limit
// keeps what it had; the 101st of a day is denied by the day limit, with
// the day limit's wait.
func TestRuleLimitsAllOrNone(t *testing.T) {
	l, c := newLimiter(t, twoLimits, httplimit.Options{})
	r := req("192.0.2.1:1", "/", "X-Api-Key", "k1")
	for i := range 10 {
		if res := l.Check(r); !res.Allowed {
			t.Fatalf("request %d denied: %+v", i, res)
		}
	}
	res := l.Check(r)
	if res.Allowed || res.DeniedBy != "api-key-second" || res.Reason != httplimit.ReasonExceeded {
		t.Fatalf("11th request in a second: %+v, want denied by api-key-second", res)
	}
	if day := policyOf(t, res, "api-key-day"); day.Remaining != 90 || day.Denied || day.Rule != "api-key" {
		t.Errorf("day limit after a denial by the second's: %+v, want 90 left, not denied, rule api-key", day)
	}
	if sec := policyOf(t, res, "api-key-second"); !sec.Denied || sec.Rule != "api-key" || sec.Key != "k1" {
		t.Errorf("second limit: %+v, want denied, rule api-key, key k1", sec)
	}
	// 90 more, one second apart, empty the day.
	for i := range 90 {
		c.Add(time.Second)
		if res := l.Check(r); !res.Allowed {
			t.Fatalf("request %d of the day denied: %+v", i, res)
		}
	}
	c.Add(time.Second)
	res = l.Check(r)
	if res.Allowed || res.DeniedBy != "api-key-day" {
		t.Fatalf("101st request of the day: %+v, want denied by api-key-day", res)
	}
	// One token of the day limit takes 864 s, less the second just waited
	// (and the refill of the earlier seconds, under a token).
	day := policyOf(t, res, "api-key-day")
	if day.RetryIn < 700 || day.RetryIn > 864 {
		t.Errorf("day limit's t = %d, want about 864 s", day.RetryIn)
	}
	if res.RetryAfter < day.RetryIn || res.RetryAfter > day.RetryIn+day.RetryIn/2 {
		t.Errorf("Retry-After %d, want the day's wait %d plus at most half of it", res.RetryAfter, day.RetryIn)
	}
	// Another key is apart.
	if res := l.Check(req("192.0.2.1:1", "/", "X-Api-Key", "k2")); !res.Allowed {
		t.Errorf("another key denied: %+v", res)
	}
}

// Retry-After is the longest wait of any limit, whichever denied: with
// both limits empty, the day's.
func TestRuleLimitsLongestWait(t *testing.T) {
	l, c := newLimiter(t, twoLimits, httplimit.Options{})
	r := req("192.0.2.1:1", "/", "X-Api-Key", "k1")
	for range 10 {
		for range 10 {
			l.Check(r)
		}
		c.Add(time.Second)
	}
	c.Add(-time.Second)
	res := l.Check(r)
	if res.Allowed || res.DeniedBy != "api-key-second" {
		t.Fatalf("got %+v, want denied by api-key-second (the first limit, both empty)", res)
	}
	day := policyOf(t, res, "api-key-day")
	if day.RetryIn < 800 {
		t.Fatalf("day limit's t = %d, want about 864 s", day.RetryIn)
	}
	if res.RetryAfter < day.RetryIn {
		t.Errorf("Retry-After %d, want at least the day limit's wait %d", res.RetryAfter, day.RetryIn)
	}
}

// The header fields carry one item per limit, named after it, and a
// denial's problem names the limit and its rule.
func TestRuleLimitsHeaders(t *testing.T) {
	l, _ := newLimiter(t, twoLimits, httplimit.Options{Headers: httplimit.HeadersDraft | httplimit.HeadersLegacy})
	r := req("192.0.2.1:1", "/", "X-Api-Key", "k1")
	w := serve(l, r)
	checkHeaders(t, "first", w, map[string]string{
		"RateLimit-Policy":    `"api-key-second";q=10;w=1, "api-key-day";q=100;w=86400`,
		"RateLimit":           `"api-key-second";r=9;t=0, "api-key-day";r=99;t=0`,
		"RateLimit-Remaining": "9",
	})
	for range 9 {
		serve(l, r)
	}
	w = serve(l, r)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("11th: %d", w.Code)
	}
	body := w.Body.String()
	for _, want := range []string{`"violated-policies":["api-key-second"]`, `Limit \"api-key-second\" of rule \"api-key\" allows 10 tokens per second with bursts of 10`} {
		if !strings.Contains(body, want) {
			t.Errorf("problem %s lacks %s", body, want)
		}
	}
	if ra, _ := strconv.Atoi(w.Header().Get("Retry-After")); ra < 1 {
		t.Errorf("Retry-After %q", w.Header().Get("Retry-After"))
	}
}

// A shadow rule with several limits takes from all of them or none, on
// its own, and never denies.
func TestRuleLimitsShadow(t *testing.T) {
	l, _ := newLimiter(t, `{"rules":[{"name":"trial","limit_keys":["ip:address"],"mode":"shadow","limits":[
		{"name":"trial-a","rps":1,"burst":5},{"name":"trial-b","rps":1,"burst":3}]}]}`, httplimit.Options{})
	r := req("192.0.2.1:1", "/")
	for range 3 {
		if res := l.Check(r); !res.Allowed || res.Reason != "" {
			t.Fatalf("got %+v, want allowed without a reason", res)
		}
	}
	res := l.Check(r)
	if !res.Allowed || res.Reason != httplimit.ReasonShadowPrefix+httplimit.ReasonExceeded || res.DeniedBy != "trial-b" {
		t.Fatalf("4th: %+v, want allowed, shadow-denied by trial-b", res)
	}
	if a := policyOf(t, res, "trial-a"); a.Remaining != 2 {
		t.Errorf("trial-a after trial-b would have denied: %v left, want 2 (nothing taken)", a.Remaining)
	}
	var b httplimit.RuleStats
	for _, s := range l.Stats() {
		if s.Name == "trial-b" {
			b = s
		}
	}
	if b.ShadowDenied != 1 || b.Allowed != 3 || b.Rule != "trial" {
		t.Errorf("trial-b stats %+v, want 3 allowed, 1 shadow-denied, rule trial", b)
	}
}

// OnDeny and Stats name the limit and its rule; a refusal (400) names the
// rule.
func TestRuleLimitsReports(t *testing.T) {
	var got []httplimit.Denial
	l, _ := newLimiter(t, `{"rules":[{"name":"api-key","limit_keys":["header:x-api-key"],
		"algorithm_config":{"cost_source":"header:x-cost","max_cost":5,"cost_out_of_range":"reject"},
		"limits":[{"name":"api-key-second","rps":10,"burst":10},{"name":"api-key-hour","rps":1,"burst":10}]}]}`,
		httplimit.Options{OnDeny: func(d httplimit.Denial) { got = append(got, d) }})
	r := req("192.0.2.1:1", "/", "X-Api-Key", "k1", "X-Cost", "5")
	l.Check(r)
	l.Check(r)
	if res := l.Check(r); res.Allowed || res.DeniedBy != "api-key-second" {
		t.Fatalf("third of cost 5: %+v, want denied by api-key-second", res)
	}
	if len(got) != 1 || got[0].Rule != "api-key" || got[0].Limit != "api-key-second" || got[0].Key != "k1" || got[0].Cost != 5 {
		t.Errorf("OnDeny got %+v, want one denial by limit api-key-second of rule api-key", got)
	}
	res := l.Check(req("192.0.2.1:1", "/", "X-Api-Key", "k1", "X-Cost", "6"))
	if res.Status != http.StatusBadRequest || res.DeniedBy != "api-key" || res.Reason != httplimit.ReasonInvalidCost {
		t.Errorf("cost 6: %+v, want 400 invalid_cost by rule api-key", res)
	}
	want := map[string]httplimit.RuleStats{
		"api-key-second": {Name: "api-key-second", Rule: "api-key", Allowed: 2, Denied: 1, Refused: 1},
		"api-key-hour":   {Name: "api-key-hour", Rule: "api-key", Allowed: 2, Refused: 1},
	}
	stats := l.Stats()
	if len(stats) != 2 {
		t.Fatalf("Stats: %d entries, want one per limit", len(stats))
	}
	for _, s := range stats {
		w := want[s.Name]
		if s.Rule != w.Rule || s.Allowed != w.Allowed || s.Denied != w.Denied || s.Refused != w.Refused {
			t.Errorf("Stats %s: %+v, want %+v", s.Name, s, w)
		}
	}
	rules := l.Rules()
	if len(rules) != 1 || len(rules[0].Limits) != 2 || rules[0].Limits[1].Name != "api-key-hour" || rules[0].Rate != 0 {
		t.Errorf("Rules() = %+v, want the one rule with its two limits", rules)
	}
}

// A limit that keeps its name and the rule's limit_keys keeps its buckets
// across a reload, retuned; so does a rule that becomes a limit of the same
// name. A new limit starts full.
func TestRuleLimitsReload(t *testing.T) {
	rules, err := httplimit.ParseRules([]byte(`{"rules":[{"name":"api","limit_keys":["ip:address"],"algorithm_config":{"rps":1,"burst":10}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := newRuleLimiter(t, httplimit.Options{}, rules...)
	r := req("192.0.2.1:1", "/")
	for range 8 {
		l.Check(r)
	}
	next, err := httplimit.ParseRules([]byte(`{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"limits":[
		{"name":"api","rps":1,"burst":10},{"name":"per-ip-day","rps":0.01,"burst":1000}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reload(next); err != nil {
		t.Fatal(err)
	}
	res := l.Check(r)
	if api := policyOf(t, res, "api"); api.Remaining != 1 {
		t.Errorf("api after becoming a limit: %v left, want 1 (its bucket kept)", api.Remaining)
	}
	if day := policyOf(t, res, "per-ip-day"); day.Remaining != 999 {
		t.Errorf("new limit: %v left, want 999 (a full bucket)", day.Remaining)
	}
}

// Every bad limit is reported, naming the field.
func TestRuleLimitsErrors(t *testing.T) {
	for _, tc := range []struct{ doc, field, problem string }{
		{`{"name":"r","limit_keys":["global"],"limits":[]}`, "limits", "at least one limit"},
		{`{"name":"r","limit_keys":["global"],"limits":{}}`, "limits", "must be a list"},
		{`{"name":"r","limit_keys":["global"],"limits":[1]}`, "limits[0]", "must be an object"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"rps":1,"burst":1}]}`, "limits[0].name", "required"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"a","rps":1}]}`, "limits[0].burst", "required"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"a","burst":1}]}`, "limits[0].tokens_per_second", "required"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"a","rps":1,"tokens_per_second":1,"burst":1}]}`, "limits[0].rps", "not both"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"a","rps":1,"burst":1,"leak":"1d"}]}`, "limits[0].leak", "unknown field"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"a","algorithm":"leaky","rps":1,"burst":1}]}`, "limits[0].algorithm", `must be "token_bucket"`},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"a","rps":2,"burst":1}]}`, "limits[0].burst", "at least the rate"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"a","rps":0,"burst":1}]}`, "limits[0].rps", "must be between"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"","rps":1,"burst":1}]}`, "limits[0].name", "non-empty"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"a","rps":1,"burst":1},{"name":"a","rps":1,"burst":2}]}`, "limits[1].name", "duplicate name: rules[0].limits[0]"},
		{`{"name":"r","limit_keys":["global"],"limits":[{"name":"r","rps":1,"burst":1}]}`, "limits[0].name", "duplicate name: rules[0]"},
		{`{"name":"r","limit_keys":["global"],"algorithm_config":{"rps":1},"limits":[{"name":"a","rps":1,"burst":1}]}`, "algorithm_config.rps", "in each of them"},
		{`{"name":"r","limit_keys":["global"],"algorithm_config":{"burst":0},"limits":[{"name":"a","rps":1,"burst":1}]}`, "algorithm_config.burst", "in each of them"},
		{`{"name":"r","limit_keys":["global"],"algorithm_config":{"fixed_cost":3},"limits":[{"name":"a","rps":1,"burst":10},{"name":"b","rps":1,"burst":2}]}`, "algorithm_config.fixed_cost", "smallest burst of the limits (2)"},
		{`{"name":"r","limit_keys":["global"],"limits":[` + strings.Repeat(`{"name":"a","rps":1,"burst":1},`, 8) + `{"name":"z","rps":1,"burst":1}]}`, "limits", "at most 8 limits, got 9"},
	} {
		_, err := httplimit.ParseRules([]byte(`{"rules":[` + tc.doc + `]}`))
		var ce *httplimit.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: got %v, want a ConfigError", tc.doc, err)
			continue
		}
		found := false
		for _, p := range ce.Problems {
			if p.Field == tc.field && strings.Contains(p.Problem, tc.problem) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s:\n got %v\nwant %s: ...%s...", tc.doc, err, tc.field, tc.problem)
		}
	}
	// Another rule's limit with a rule's name.
	_, err := httplimit.ParseRules([]byte(`{"rules":[{"name":"a","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":1}},
		{"name":"b","limit_keys":["ip:address"],"limits":[{"name":"a","rps":1,"burst":1}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "duplicate name: rules[0] has it too") {
		t.Errorf("a limit named as another rule: %v", err)
	}
	// The Go form is checked as the JSON is.
	err = httplimit.Validate([]httplimit.Rule{{Name: "r", LimitKeys: []string{"global"}, Rate: 1,
		Limits: []httplimit.Limit{{Name: "a", Rate: 1, Burst: 1}}}}, httplimit.Options{})
	if err == nil || !strings.Contains(err.Error(), "algorithm_config.tokens_per_second") {
		t.Errorf("Go rule with a rate beside its limits: %v", err)
	}
}
