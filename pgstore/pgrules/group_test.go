package pgrules_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
)

func num(n int) *int { return &n }

// Rows sharing a scope, key_pattern and plan are one rule with a limit per
// row, named after the lowest rule_id; a lone token bucket stays a plain
// rule, a lone quota is a rule with one limit.
func TestMappingGroups(t *testing.T) {
	rows := []pgrules.Row{
		{RuleID: 7, KeyPattern: "global", Scope: "global", RatePerSecond: 100, BurstCapacity: 200},
		{RuleID: 2, KeyPattern: "ip:{ip}", Scope: "ip", QuotaPeriod: plan("day"), BurstCapacity: 1000},
		{RuleID: 1, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 10, BurstCapacity: 20},
		{RuleID: 4, KeyPattern: "user:{id}", Scope: "user", Plan: plan("pro"), QuotaPeriod: plan("month"), BurstCapacity: 100000,
			TimeZone: plan("Europe/Berlin"), AnchorDay: num(15), AnchorHour: num(6)},
		{RuleID: 3, KeyPattern: "user:{id}", Scope: "user", Plan: plan("pro"), RatePerSecond: 1, BurstCapacity: 10},
		{RuleID: 5, KeyPattern: "ip:{ip}", Scope: "ip", Plan: plan("pro"), RatePerSecond: 50, BurstCapacity: 50},
		{RuleID: 6, KeyPattern: "endpoint:/export", Scope: "endpoint", QuotaPeriod: plan("week"), BurstCapacity: 3, AnchorWeekday: plan("sunday")},
		{RuleID: 8, KeyPattern: "user:{id}", Scope: "user", QuotaPeriod: plan("year"), BurstCapacity: 5000, AnchorMonth: num(4), AnchorDay: num(6)},
	}
	got, err := headerKeys.Rules(rows, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []httplimit.Rule{
		{Name: "group-3", LimitKeys: []string{"header:x-user"}, Match: map[string][]string{"header:x-plan": {"pro"}}, Limits: []httplimit.Limit{
			{Name: "rule-3", Rate: 1, Burst: 10},
			{Name: "rule-4", Quota: 100000, Period: "month", TimeZone: "Europe/Berlin", Anchor: httplimit.Anchor{Day: 15, Hour: 6}},
		}},
		{Name: "rule-5", LimitKeys: []string{"ip:address"}, Rate: 50, Burst: 50, Match: map[string][]string{"header:x-plan": {"pro"}}},
		{Name: "group-1", LimitKeys: []string{"ip:address"}, Limits: []httplimit.Limit{
			{Name: "rule-1", Rate: 10, Burst: 20},
			{Name: "rule-2", Quota: 1000, Period: "day"},
		}},
		{Name: "group-6", LimitKeys: []string{"path"}, Match: map[string][]string{"path": {"/export"}}, Limits: []httplimit.Limit{
			{Name: "rule-6", Quota: 3, Period: "week", Anchor: httplimit.Anchor{Weekday: "sunday"}},
		}},
		{Name: "rule-7", LimitKeys: []string{"global"}, Rate: 100, Burst: 200},
		{Name: "group-8", LimitKeys: []string{"header:x-user"}, Limits: []httplimit.Limit{
			{Name: "rule-8", Quota: 5000, Period: "year", Anchor: httplimit.Anchor{Month: 4, Day: 6}},
		}},
	}
	if !rulesEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
	if _, err := httplimit.New(got, httplimit.Options{}); err != nil {
		t.Errorf("httplimit.New refuses the mapped rules: %v", err)
	}
}

// A group is decided all or none: the per-second row and the day's quota
// each deny, and a denial names the row's limit, which RuleIDOf leads back
// to the row.
func TestMappingGroupEnforces(t *testing.T) {
	rows := []pgrules.Row{
		{RuleID: 11, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 1, BurstCapacity: 2},
		{RuleID: 12, KeyPattern: "ip:{ip}", Scope: "ip", QuotaPeriod: plan("day"), BurstCapacity: 3},
	}
	rules, err := pgrules.Mapping{}.Rules(rows, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	var denials []httplimit.Denial
	lim, err := httplimit.New(rules, httplimit.Options{Now: func() time.Time { return now }, OnDeny: func(d httplimit.Denial) { denials = append(denials, d) }})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	check := func() httplimit.Result {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		return lim.Check(r)
	}
	for i, want := range []string{"", "", "rule-11"} {
		if res := check(); res.DeniedBy != want {
			t.Fatalf("request %d: denied by %q, want %q", i, res.DeniedBy, want)
		}
	}
	now = now.Add(time.Hour) // the bucket full again; the day's quota has 1 left
	for i, want := range []string{"", "rule-12"} {
		if res := check(); res.DeniedBy != want {
			t.Fatalf("an hour later, request %d: denied by %q, want %q", i, res.DeniedBy, want)
		}
	}
	if len(denials) != 2 || denials[1].Rule != "group-11" || denials[1].Limit != "rule-12" {
		t.Fatalf("denials %+v, want the second by limit rule-12 of group-11", denials)
	}
	if id, ok := pgrules.RuleIDOf(denials[1].Limit); !ok || id != 12 {
		t.Errorf("RuleIDOf(%q) = %d, %v, want 12", denials[1].Limit, id, ok)
	}
	if _, ok := pgrules.RuleIDOf(denials[1].Rule); ok {
		t.Errorf("RuleIDOf(%q) gives a row; a group is several", denials[1].Rule)
	}
}

// A group with a bad row is left out whole, every row of it named: the
// bad ones with each problem by column, the others as left out with them.
// Another group stays in force.
func TestMappingGroupBadRows(t *testing.T) {
	rows := []pgrules.Row{
		// Group 1: row 2 is a quota with a rate, row 3 has an anchor
		// without being a quota; row 1 is fine.
		{RuleID: 1, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 1, BurstCapacity: 2},
		{RuleID: 2, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 5, QuotaPeriod: plan("day"), BurstCapacity: 100},
		{RuleID: 3, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 1, BurstCapacity: 5, AnchorHour: num(3)},
		// Group 4: row 5's burst is below its rate, found by httplimit.
		{RuleID: 4, KeyPattern: "global", Scope: "global", RatePerSecond: 1, BurstCapacity: 2},
		{RuleID: 5, KeyPattern: "global", Scope: "global", RatePerSecond: 10, BurstCapacity: 5},
		// Group 6: a bad scope in both rows.
		{RuleID: 6, KeyPattern: "tenant:{t}", Scope: "tenant", RatePerSecond: 1, BurstCapacity: 2},
		{RuleID: 7, KeyPattern: "tenant:{t}", Scope: "tenant", QuotaPeriod: plan("month"), BurstCapacity: 10},
		// Lone quotas, each bad in its own way.
		{RuleID: 8, KeyPattern: "user:{id}", Scope: "user", QuotaPeriod: plan("fortnight"), BurstCapacity: 10, TimeZone: plan("Mars/Olympus")},
		{RuleID: 9, KeyPattern: "endpoint:/a", Scope: "endpoint", QuotaPeriod: plan("day"), BurstCapacity: 0, AnchorDay: num(15), AnchorWeekday: plan("funday")},
		{RuleID: 10, KeyPattern: "endpoint:/b", Scope: "endpoint", QuotaPeriod: plan(""), BurstCapacity: 0, TimeZone: plan("")},
		{RuleID: 11, KeyPattern: "endpoint:/c", Scope: "endpoint", QuotaPeriod: plan("year"), BurstCapacity: 10, AnchorMonth: num(2), AnchorDay: num(30), AnchorHour: num(24)},
		// Fine: stays.
		{RuleID: 12, KeyPattern: "endpoint:/d", Scope: "endpoint", RatePerSecond: 1, BurstCapacity: 1},
		{RuleID: 13, KeyPattern: "endpoint:/d", Scope: "endpoint", QuotaPeriod: plan("month"), BurstCapacity: 100},
	}
	rules, err := headerKeys.Rules(rows, httplimit.Options{})
	if got, want := names(rules), []string{"group-12"}; !slices.Equal(got, want) {
		t.Errorf("kept %q, want %q", got, want)
	}
	var re *pgrules.RowsError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a *RowsError", err)
	}
	if got, want := re.RuleIDs(), []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; !slices.Equal(got, want) {
		t.Errorf("rows left out %v, want %v", got, want)
	}
	msg := err.Error()
	for _, want := range []string{
		"rule 1: key_pattern: left out with rules 2, 3: the rows sharing a scope, key_pattern and plan are one rule, in force all or none",
		`rule 2: rate_per_second: a calendar quota (quota_period "day") has burst_capacity tokens per period and no rate: must be 0, got 5`,
		"rule 3: anchor_hour: only a calendar quota (quota_period set) has an anchor: must be NULL, got 3",
		"rule 4: key_pattern: left out with rule 5: the rows",
		"rule 5: burst_capacity: must be at least the rate (10), got 5",
		`rule 6: scope: must be "user", "endpoint", "global" or "ip", got "tenant"`,
		`rule 7: scope: must be "user", "endpoint", "global" or "ip", got "tenant"`,
		`rule 8: quota_period: must be "day", "week", "month" or "year", got "fortnight"`,
		`rule 8: time_zone: must be an IANA zone name such as "Europe/Berlin", got "Mars/Olympus"`,
		"rule 9: burst_capacity: must be between 1 and 1e9 tokens per period, got 0",
		"rule 9: anchor_day: must be NULL: only a monthly or yearly period has a first day of the month, got 15",
		`rule 9: anchor_weekday: must be "monday" to "sunday", got "funday"`,
		`rule 10: quota_period: must be NULL (a token bucket) or "day", "week", "month" or "year", got ""`,
		`rule 10: time_zone: must be NULL (UTC) or an IANA zone name such as "Europe/Berlin", got ""`,
		"rule 10: burst_capacity: must be between 1 and 1e9 tokens per period, got 0",
		"rule 11: anchor_day: must be at most 29, the length of February, got 30",
		"rule 11: anchor_hour: must be between 0 and 23, got 24",
	} {
		if !strings.Contains(msg, "\n  "+want) {
			t.Errorf("no line %q in\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n"); n != 17 {
		t.Errorf("%d problems, want 17:\n%s", n, msg)
	}
}

// More rows on one key than httplimit's limits per rule: every row is
// named.
func TestMappingGroupTooManyRows(t *testing.T) {
	var rows []pgrules.Row
	for i := range 9 {
		rows = append(rows, pgrules.Row{RuleID: int64(i + 1), KeyPattern: "global", Scope: "global", RatePerSecond: 1, BurstCapacity: int64(i + 1)})
	}
	rules, err := pgrules.Mapping{}.Rules(rows, httplimit.Options{})
	var re *pgrules.RowsError
	if rules != nil || !errors.As(err, &re) || len(re.RuleIDs()) != 9 {
		t.Fatalf("rules %q, err %v: want every row left out", names(rules), err)
	}
	if want := "rule 9: key_pattern: the rows sharing a scope, key_pattern and plan are one rule, which must hold at most 8 limits, got 9"; !strings.Contains(err.Error(), want) {
		t.Errorf("no %q in\n%v", want, err)
	}
}

// A group that can never apply, because an earlier rule keys requests the
// same way for the same plans, names each of its rows and the earlier
// group by its lowest row.
func TestMappingGroupNeverApplies(t *testing.T) {
	rows := []pgrules.Row{
		{RuleID: 1, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 1, BurstCapacity: 2},
		{RuleID: 2, KeyPattern: "ip:{ip}", Scope: "ip", QuotaPeriod: plan("day"), BurstCapacity: 100},
		{RuleID: 3, KeyPattern: "ip:{client}", Scope: "ip", RatePerSecond: 1, BurstCapacity: 2},
		{RuleID: 4, KeyPattern: "ip:{client}", Scope: "ip", RatePerSecond: 1, BurstCapacity: 5, TimeZone: plan("UTC")},
	}
	rules, err := pgrules.Mapping{}.Rules(rows, httplimit.Options{})
	if got, want := names(rules), []string{"group-1"}; !slices.Equal(got, want) {
		t.Errorf("kept %q, want %q", got, want)
	}
	msg := fmt.Sprint(err)
	for _, want := range []string{
		"rule 3: key_pattern: left out with rule 4",
		"rule 4: time_zone: only a calendar quota (quota_period set) has a time zone: must be NULL, got \"UTC\"",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("no %q in\n%s", want, msg)
		}
	}
	rows[3].TimeZone = nil
	_, err = pgrules.Mapping{}.Rules(rows, httplimit.Options{})
	msg = fmt.Sprint(err)
	for _, id := range []string{"3", "4"} {
		if want := "rule " + id + ": key_pattern: the rule can never apply: rule 1 comes first"; !strings.Contains(msg, want) {
			t.Errorf("no %q in\n%s", want, msg)
		}
	}
}
