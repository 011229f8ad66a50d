package pgrules_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
)

// Rows as Source reads them, mapped onto rules: the plan's row first (a
// tier), the bad row left out with its problems.
func ExampleMapping_Rules() {
	pro := "pro"
	rows := []pgrules.Row{
		{RuleID: 1, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 5, BurstCapacity: 10},
		{RuleID: 2, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 50, BurstCapacity: 100, Plan: &pro},
		{RuleID: 3, KeyPattern: "endpoint:/api/search", Scope: "endpoint", RatePerSecond: -1, BurstCapacity: 10},
	}
	rules, err := pgrules.Mapping{PlanKey: "header:x-plan"}.Rules(rows, httplimit.Options{})
	for _, r := range rules {
		fmt.Println(r.Name, r.LimitKeys, r.Match, r.Rate, r.Burst)
	}
	fmt.Println(err)
	// Output:
	// rule-2 [ip:address] map[header:x-plan:[pro]] 50 100
	// rule-1 [ip:address] map[] 5 10
	// pgrules: rows left out:
	//   rule 3: rate_per_second: must be between 1/31622400 (one token per 366 days) and 1e9 tokens per second, got -1
}

// Rows sharing a key_pattern and plan are one rule with a limit per row:
// a per-second bucket and a daily quota for every plan, a per-second
// bucket and a monthly quota from the 15th, Berlin time, for plan pro.
func ExampleMapping_Rules_limits() {
	pro, day, month, berlin, fifteenth := "pro", "day", "month", "Europe/Berlin", 15
	rows := []pgrules.Row{
		{RuleID: 1, KeyPattern: "user:{user_id}", Scope: "user", RatePerSecond: 10, BurstCapacity: 20},
		{RuleID: 2, KeyPattern: "user:{user_id}", Scope: "user", BurstCapacity: 10000, QuotaPeriod: &day},
		{RuleID: 3, KeyPattern: "user:{user_id}", Scope: "user", RatePerSecond: 100, BurstCapacity: 200, Plan: &pro},
		{RuleID: 4, KeyPattern: "user:{user_id}", Scope: "user", BurstCapacity: 1000000, Plan: &pro,
			QuotaPeriod: &month, TimeZone: &berlin, AnchorDay: &fifteenth},
	}
	m := pgrules.Mapping{UserKey: "header:x-user", PlanKey: "header:x-plan"}
	rules, err := m.Rules(rows, httplimit.Options{})
	if err != nil {
		panic(err)
	}
	for _, r := range rules {
		fmt.Println(r.Name, r.Match)
		for _, l := range r.Limits {
			if l.Period == "" {
				fmt.Printf("  %s: %v a second, burst %v\n", l.Name, l.Rate, l.Burst)
				continue
			}
			fmt.Printf("  %s: %v a %s, zone %q, anchor %+v\n", l.Name, l.Quota, l.Period, l.TimeZone, l.Anchor)
		}
	}
	lim, err := httplimit.New(rules, httplimit.Options{})
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-User", "ann")
	lim.Handler(http.NotFoundHandler()).ServeHTTP(w, r)
	fmt.Println(w.Header().Get("RateLimit-Policy"))
	// Output:
	// group-3 map[header:x-plan:[pro]]
	//   rule-3: 100 a second, burst 200
	//   rule-4: 1e+06 a month, zone "Europe/Berlin", anchor {Month:0 Day:15 Weekday: Hour:0}
	// group-1 map[]
	//   rule-1: 10 a second, burst 20
	//   rule-2: 10000 a day, zone "", anchor {Month:0 Day:0 Weekday: Hour:0}
	// "rule-1";q=20;w=2, "rule-2";q=10000;w=86400
}
