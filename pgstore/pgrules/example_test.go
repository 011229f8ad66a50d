package pgrules_test

import (
	"fmt"

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
