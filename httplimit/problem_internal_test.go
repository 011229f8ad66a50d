package httplimit

import (
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// checkedPolicy is the Policy Check makes for an enforce or shadow rule,
// with its precomputed fields, and the state of a denial.
func checkedPolicy(t testing.TB, name, mode string, rate, burst float64) Policy {
	return checkedLimitPolicy(t, name, "", mode, rate, burst)
}

// checkedLimitPolicy is checkedPolicy for a limit of rule (or a rule with
// one limit, for "").
func checkedLimitPolicy(t testing.TB, name, rule, mode string, rate, burst float64) Policy {
	t.Helper()
	quoted := sfString(name)
	p := Policy{Name: name, Rule: rule, Mode: mode, Key: "k", Rate: rate, Burst: burst, Cost: 1, Remaining: 0.5, RetryIn: 2, FullIn: 3,
		Quota: quota(burst), Window: window(rate, burst), quoted: quoted, denial: newDenialBody(name, rule, rate, burst)}
	p.policy = policyItem(quoted, p.Quota, p.Window)
	if p.denial == nil {
		t.Fatalf("no denial body for rule %q rate %v burst %v", name, rate, burst)
	}
	return p
}

// sameProblem fails t unless WriteProblem writes res as writeProblemSlow
// does: status, header fields and body, byte for byte, into a writer that
// starts with the same fields. With fast, it also fails unless res is
// written from the precomputed parts.
func sameProblem(t *testing.T, res *Result, fast bool) {
	t.Helper()
	if got := res.denialBody() != nil; got != fast {
		t.Fatalf("precomputed body used: %v, want %v (%+v)", got, fast, res)
	}
	for _, cached := range []bool{false, true} {
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		for _, w := range []*httptest.ResponseRecorder{got, want} {
			w.Header()["Retry-After"] = []string{"stale"}
			w.Header()["X-App"] = []string{"kept"}
		}
		if cached {
			res.writeProblem(got, newHeaderValues())
			res.writeProblemSlow(want, newHeaderValues())
		} else {
			res.WriteProblem(got)
			res.writeProblemSlow(want, nil)
		}
		if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) || got.Body.String() != want.Body.String() {
			t.Fatalf("cached values %v: WriteProblem writes\n%d %v\n%q\nwant\n%d %v\n%q",
				cached, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}

// The ordinary 429, written from the rule's precomputed parts, is byte for
// byte what Problem and encoding/json write: names that encoding/json
// escapes (quotes, backslashes, <, > and &, controls, U+2028), that it
// leaves (other Unicode) or replaces (bytes that are not UTF-8), rates and
// bursts in every form FormatFloat gives, any Retry-After, among other
// rules, with every header set.
func TestWriteProblemMatchesSlow(t *testing.T) {
	names := []string{"per-ip", `a"b`, `<script>&amp;</script>`, `back\slash\`, "ünïcödé", "line\u2028sep\u2029",
		"tab\tnl\n", "\x00\x1f\x7f", "\xff\xfe bad", "🚀", "%d %s %q %%", `\u003c`, "", strings.Repeat("x<\"", 700)}
	limits := [][2]float64{{1, 1}, {0.5, 2}, {10, 20}, {1e-9, 1e-9}, {1e300, math.MaxFloat64}, {0.1 + 0.2, 10.0 / 3},
		{5e-324, 1}, {1, 1e21}, {123456789.125, 1e9}}
	retries := []int64{0, 1, 9, 10, 99, 100, 12345, math.MaxInt64, -1, math.MinInt64}
	headers := []HeaderSet{0, HeadersLegacy | HeadersX, HeadersDraft | HeadersShadow}
	for _, name := range names {
		for _, lim := range limits {
			denier := checkedPolicy(t, name, ModeEnforce, lim[0], lim[1])
			layouts := [][]Policy{
				{denier},
				{checkedPolicy(t, "tenant", ModeEnforce, 100, 1000), denier, checkedPolicy(t, "trial", ModeShadow, 1, 1)},
				// A caller's copy of the rule before Check's: the last
				// one of the name is the denier.
				{{Name: name, Mode: ModeEnforce, Rate: 7, Burst: 9}, denier},
				// A limit of a rule with several, named as either.
				{checkedLimitPolicy(t, "day", name, ModeEnforce, 1, 100), checkedLimitPolicy(t, name, name, ModeEnforce, lim[0], lim[1])},
			}
			for _, policies := range layouts {
				for _, retry := range retries {
					for _, set := range headers {
						res := Result{Status: http.StatusTooManyRequests, Reason: ReasonExceeded, DeniedBy: name,
							RetryAfter: retry, Policies: policies, Headers: set}
						sameProblem(t, &res, true)
					}
				}
			}
		}
	}
}

// Every other problem, and a denial whose rule fields are not those the
// parts were made for, is written by writeProblemSlow.
func TestWriteProblemSlowCases(t *testing.T) {
	denier := checkedPolicy(t, "per-ip", ModeEnforce, 1, 2)
	changed := func(f func(*Policy)) []Policy {
		p := denier
		f(&p)
		return []Policy{p}
	}
	deny := func(status int, reason string, policies []Policy) Result {
		return Result{Status: status, Reason: reason, DeniedBy: "per-ip", Detail: "it said <no>", RetryAfter: 3, Policies: policies}
	}
	for name, res := range map[string]Result{
		"store unavailable": deny(http.StatusServiceUnavailable, ReasonStoreUnavailable, []Policy{denier}),
		"invalid path":      deny(http.StatusBadRequest, ReasonInvalidPath, []Policy{}),
		"invalid cost":      deny(http.StatusBadRequest, ReasonInvalidCost, []Policy{denier}),
		"ambiguous value":   deny(http.StatusBadRequest, ReasonAmbiguousValue, []Policy{denier}),
		"cost over burst":   deny(http.StatusTooManyRequests, ReasonCostExceedsBurst, []Policy{denier}),
		"no reason":         deny(http.StatusTooManyRequests, "", []Policy{denier}),
		"shadow reason":     deny(http.StatusTooManyRequests, ReasonShadowPrefix+ReasonExceeded, []Policy{denier}),
		"other status":      deny(http.StatusTeapot, ReasonExceeded, []Policy{denier}),
		"built by a caller": deny(http.StatusTooManyRequests, ReasonExceeded, []Policy{{Name: "per-ip", Mode: ModeEnforce, Rate: 1, Burst: 2}}),
		"no policy":         deny(http.StatusTooManyRequests, ReasonExceeded, nil),
		"shadow denier":     deny(http.StatusTooManyRequests, ReasonExceeded, changed(func(p *Policy) { p.Mode = ModeShadow })),
		"rate changed":      deny(http.StatusTooManyRequests, ReasonExceeded, changed(func(p *Policy) { p.Rate = 3 })),
		"burst changed":     deny(http.StatusTooManyRequests, ReasonExceeded, changed(func(p *Policy) { p.Burst = 3 })),
		"rule changed":      deny(http.StatusTooManyRequests, ReasonExceeded, changed(func(p *Policy) { p.Rule = "api" })),
		"zero sign changed": deny(http.StatusTooManyRequests, ReasonExceeded, changed(func(p *Policy) {
			p.denial = newDenialBody("per-ip", "", 0, 2)
			p.Rate = math.Copysign(0, -1)
		})),
	} {
		t.Run(name, func(t *testing.T) { sameProblem(t, &res, false) })
	}
	allowed := Result{Allowed: true, Status: http.StatusOK, Policies: []Policy{denier}}
	w := httptest.NewRecorder()
	allowed.WriteProblem(w)
	if len(w.Header()) != 0 || w.Body.Len() != 0 {
		t.Errorf("an allowed result writes %v %q", w.Header(), w.Body)
	}
}

// Check's own denial, by a rule whose name encoding/json escapes, is
// written from the parts precomputed for the rule.
func TestWriteProblemFromCheck(t *testing.T) {
	rules, err := ParseRules([]byte(`{"rules":[{"name":"a\"<b>&\\c","limit_keys":["ip:address"],"algorithm_config":{"rps":0.5,"burst":1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(rules, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	var res Result
	for range 2 {
		res = l.Check(r)
	}
	if res.Status != http.StatusTooManyRequests || res.Reason != ReasonExceeded {
		t.Fatalf("second request: %+v", res)
	}
	sameProblem(t, &res, true)
	w := httptest.NewRecorder()
	res.WriteProblem(w)
	if want := `"detail":"Rule \"a\\\"\u003cb\u003e\u0026\\\\c\" allows 0.5 tokens per second`; !strings.Contains(w.Body.String(), want) {
		t.Errorf("body %s\nlacks %s", w.Body, want)
	}
}

// The fast path writes what the slow one does, for any rule and any
// Retry-After.
func FuzzWriteProblem(f *testing.F) {
	f.Add("per-ip", 1.0, 1.0, int64(1), uint8(0))
	f.Add(`a"<b>&\c`, 0.5, 2.0, int64(0), uint8(HeadersLegacy|HeadersX))
	f.Add("line\u2028sep", 1e-9, 1e21, int64(math.MaxInt64), uint8(HeadersShadow))
	f.Add("\xff\xfe", math.Inf(1), math.NaN(), int64(-1), uint8(HeadersDraft|HeadersShadow))
	f.Add("🚀 %d", 5e-324, math.MaxFloat64, int64(123456), uint8(HeadersX))
	f.Fuzz(func(t *testing.T, name string, rate, burst float64, retry int64, set uint8) {
		p := Policy{Name: name, Mode: ModeEnforce, Rate: rate, Burst: burst, RetryIn: retry, Quota: 1, Window: 1,
			denial: newDenialBody(name, "", rate, burst)}
		if p.denial == nil {
			t.Fatalf("no denial body for rule %q rate %v burst %v", name, rate, burst)
		}
		res := Result{Status: http.StatusTooManyRequests, Reason: ReasonExceeded, DeniedBy: name, RetryAfter: retry,
			Policies: []Policy{p}, Headers: HeaderSet(set) & (HeadersDraft | HeadersLegacy | HeadersX | HeadersShadow)}
		sameProblem(t, &res, true)
	})
}
