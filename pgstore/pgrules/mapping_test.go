package pgrules_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
)

func plan(s string) *string { return &s }

// headerKeys reads users and plans from headers, so that the tests need no
// tokens.
var headerKeys = pgrules.Mapping{UserKey: "header:x-user", PlanKey: "header:x-plan"}

// trustAll verifies nothing; it only tells httplimit that claims are
// verified, as serve's verifier would.
type trustAll struct{}

func (trustAll) VerifyJWT(string) (httplimit.Claims, error) { return httplimit.Claims{}, nil }

func TestMappingEveryScopeAndPlan(t *testing.T) {
	rows := []pgrules.Row{
		{RuleID: 1, KeyPattern: "user:{user_id}", Scope: "user", RatePerSecond: 1, BurstCapacity: 10},
		{RuleID: 2, KeyPattern: "user:{user_id}", Scope: "user", RatePerSecond: 100, BurstCapacity: 1000, Plan: plan("pro")},
		{RuleID: 3, KeyPattern: "endpoint:/api/search", Scope: "endpoint", RatePerSecond: 5, BurstCapacity: 5},
		{RuleID: 4, KeyPattern: "global", Scope: "global", RatePerSecond: 1000, BurstCapacity: 2000},
		{RuleID: 5, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 2, BurstCapacity: 4, Plan: plan("free")},
		{RuleID: 6, KeyPattern: "endpoint:/api/search", Scope: "endpoint", RatePerSecond: 50, BurstCapacity: 50, Plan: plan("enterprise")},
	}
	for _, tt := range []struct {
		m    pgrules.Mapping
		user string
		plan string
	}{
		{pgrules.Mapping{}, "jwt:sub", "jwt:plan"},
		{headerKeys, "header:x-user", "header:x-plan"},
	} {
		got, err := tt.m.Rules(rows, httplimit.Options{JWT: trustAll{}})
		if err != nil {
			t.Fatalf("%+v: %v", tt.m, err)
		}
		// Rows with a plan first, each kind by rule_id: tiers.
		want := []httplimit.Rule{
			{Name: "rule-2", LimitKeys: []string{tt.user}, Rate: 100, Burst: 1000, Match: map[string][]string{tt.plan: {"pro"}}},
			{Name: "rule-5", LimitKeys: []string{"ip:address"}, Rate: 2, Burst: 4, Match: map[string][]string{tt.plan: {"free"}}},
			{Name: "rule-6", LimitKeys: []string{"path"}, Rate: 50, Burst: 50, Match: map[string][]string{"path": {"/api/search"}, tt.plan: {"enterprise"}}},
			{Name: "rule-1", LimitKeys: []string{tt.user}, Rate: 1, Burst: 10},
			{Name: "rule-3", LimitKeys: []string{"path"}, Rate: 5, Burst: 5, Match: map[string][]string{"path": {"/api/search"}}},
			{Name: "rule-4", LimitKeys: []string{"global"}, Rate: 1000, Burst: 2000},
		}
		if !rulesEqual(got, want) {
			t.Errorf("%+v:\n got %+v\nwant %+v", tt.m, got, want)
		}
	}
}

func rulesEqual(a, b []httplimit.Rule) bool {
	return slices.EqualFunc(a, b, func(x, y httplimit.Rule) bool {
		if x.Name != y.Name || x.Rate != y.Rate || x.Burst != y.Burst || !slices.Equal(x.LimitKeys, y.LimitKeys) ||
			!slices.Equal(x.Limits, y.Limits) || len(x.Match) != len(y.Match) {
			return false
		}
		for k, v := range x.Match {
			if !slices.Equal(v, y.Match[k]) {
				return false
			}
		}
		return true
	})
}

// Plans are tiers: a plan's row applies to its plan, the row without a plan
// to every other plan and to requests without one; the endpoint rule only to
// its path; the global rule to everything.
func TestMappedRulesEnforce(t *testing.T) {
	rows := []pgrules.Row{
		{RuleID: 1, KeyPattern: "user:{id}", Scope: "user", RatePerSecond: 0.001, BurstCapacity: 2},
		{RuleID: 2, KeyPattern: "user:{id}", Scope: "user", RatePerSecond: 0.001, BurstCapacity: 4, Plan: plan("pro")},
		{RuleID: 3, KeyPattern: "endpoint:/search", Scope: "endpoint", RatePerSecond: 0.001, BurstCapacity: 3},
		{RuleID: 4, KeyPattern: "global", Scope: "global", RatePerSecond: 0.001, BurstCapacity: 100},
	}
	rules, err := headerKeys.Rules(rows, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := httplimit.New(rules, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	admitted := func(n int, path string, headers ...string) int {
		ok := 0
		for range n {
			r := httptest.NewRequest("GET", path, nil)
			for i := 0; i < len(headers); i += 2 {
				r.Header.Set(headers[i], headers[i+1])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code == 200 {
				ok++
			}
		}
		return ok
	}
	for _, tt := range []struct {
		what    string
		n       int
		path    string
		headers []string
		want    int
	}{
		{"a free user: the rule for every plan", 5, "/x", []string{"X-User", "ann", "X-Plan", "free"}, 2},
		{"a user without a plan: the same", 5, "/x", []string{"X-User", "bob"}, 2},
		{"a pro user: the pro row instead", 5, "/x", []string{"X-User", "cid", "X-Plan", "pro"}, 4},
		{"the endpoint: one bucket for all its users", 5, "/search", []string{"X-User", "dan"}, 2},
		{"the endpoint, another user", 5, "/search", []string{"X-User", "eve"}, 1},
	} {
		if got := admitted(tt.n, tt.path, tt.headers...); got != tt.want {
			t.Errorf("%s: %d of %d admitted, want %d", tt.what, got, tt.n, tt.want)
		}
	}
	// 2+2+4+2+1 requests admitted so far, and 4 more of a pro user: the
	// global burst of 100 took every one.
	if got := admitted(100, "/y", "X-User", "fay", "X-Plan", "pro"); got != 4 {
		t.Errorf("another pro user: %d admitted, want 4", got)
	}
	users := 0
	for i := range 100 {
		users += admitted(1, "/y", "X-User", "u"+strconv.Itoa(i))
	}
	if users != 100-15 {
		t.Errorf("100 users, one request each: %d admitted, want %d, the rest of the global burst", users, 100-15)
	}
}

// Every problem of every bad row, by rule_id and column; the good rows stay.
func TestMappingBadRows(t *testing.T) {
	rows := []pgrules.Row{
		{RuleID: 7, KeyPattern: "user:{user_id}", Scope: "user", RatePerSecond: -1, BurstCapacity: 0},
		{RuleID: 8, KeyPattern: "tenant:{org}", Scope: "tenant", RatePerSecond: 1, BurstCapacity: 1, Plan: plan("")},
		{RuleID: 9, KeyPattern: "endpoint:/api/*", Scope: "endpoint", RatePerSecond: 10, BurstCapacity: 5},
		{RuleID: 10, KeyPattern: "ip:10.0.0.1", Scope: "ip", RatePerSecond: 1, BurstCapacity: 1},
		{RuleID: 11, KeyPattern: "global:all", Scope: "global", RatePerSecond: 1, BurstCapacity: 1},
		{RuleID: 12, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 1, BurstCapacity: 2},
		{RuleID: 13, KeyPattern: "ip:{client}", Scope: "ip", RatePerSecond: 1, BurstCapacity: 2},
		{RuleID: 14, KeyPattern: "user:{user_id}", Scope: "user", RatePerSecond: 1, BurstCapacity: 2, Plan: plan("pro")},
		{RuleID: 15, KeyPattern: "global", Scope: "global", RatePerSecond: 1, BurstCapacity: 2},
	}
	rules, err := pgrules.Mapping{}.Rules(rows, httplimit.Options{})
	var names []string
	for _, r := range rules {
		names = append(names, r.Name)
	}
	if want := []string{"rule-12", "rule-15"}; !slices.Equal(names, want) {
		t.Errorf("kept %q, want %q", names, want)
	}
	var re *pgrules.RowsError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a *RowsError", err)
	}
	if got, want := re.RuleIDs(), []int64{7, 8, 9, 10, 11, 13, 14}; !slices.Equal(got, want) {
		t.Errorf("rows left out %v, want %v", got, want)
	}
	msg := err.Error()
	for _, want := range []string{
		"rule 7: rate_per_second: must be between 1/31622400 (one token per 366 days) and 1e9 tokens per second, got -1",
		"rule 7: burst_capacity: must be between 1 and 1e9 tokens, got 0",
		"rule 7: key_pattern: reads a JWT claim, but no verifier is configured",
		"rule 8: scope: must be \"user\", \"endpoint\", \"global\" or \"ip\", got \"tenant\"",
		"rule 8: plan: must be NULL (every plan) or a plan's name, got \"\"",
		"rule 9: key_pattern: scope \"endpoint\" takes \"endpoint:/<path>\"",
		"rule 9: burst_capacity: must be at least the rate (10), got 5",
		"rule 10: key_pattern: scope \"ip\" takes \"ip:{<name>}\" (one bucket per client address), got \"ip:10.0.0.1\"",
		"rule 11: key_pattern: scope \"global\" takes \"global\"",
		"rule 13: key_pattern: the rule can never apply: rule 12 comes first",
		// No verifier in the options: a JWT claim would be anyone's to claim.
		"rule 14: key_pattern: reads a JWT claim, but no verifier is configured",
		"rule 14: plan: reads a JWT claim, but no verifier is configured",
	} {
		if !strings.Contains(msg, "\n  "+want) {
			t.Errorf("no line %q in\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n"); n != 12 {
		t.Errorf("%d problems, want 12:\n%s", n, msg)
	}
}

func TestMappingChecksItsKeys(t *testing.T) {
	_, err := pgrules.Mapping{UserKey: "cookie:sid", PlanKey: "ip:address"}.Rules(nil, httplimit.Options{})
	if err == nil || !strings.Contains(err.Error(), `user key: unknown limit key "cookie:sid"`) || !strings.Contains(err.Error(), `plan key: unknown match key "ip:address"`) {
		t.Errorf("err = %v, want both keys refused", err)
	}
}

// A rule's name leads back to its row, and only a canonical name does.
func TestRuleIDOf(t *testing.T) {
	for _, id := range []int64{0, 1, 42, 1<<63 - 1} {
		if got, ok := pgrules.RuleIDOf(pgrules.RuleName(id)); !ok || got != id {
			t.Errorf("RuleIDOf(RuleName(%d)) = %d, %v", id, got, ok)
		}
	}
	for _, name := range []string{pgrules.GroupName(7), "rule-", "rule-007", "rule-+7", "rule-x", "per-ip", "rule-7 ", "rule-99999999999999999999"} {
		if id, ok := pgrules.RuleIDOf(name); ok {
			t.Errorf("RuleIDOf(%q) = %d, want no id", name, id)
		}
	}
}
