package main

import (
	"path/filepath"
	"testing"

	"github.com/faucetgo/faucet/pgstore/pgtest"
)

// A rule with two limits is decided as one on every store: 30 checks of
// one client, sent to two instances in turn, admit the 5 of the tighter
// limit; its denials take nothing from the other, which holds 8 - 5 = 3
// at the end; each denial names the limit and its rule.
func TestServeRuleLimitsEndToEnd(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"fail_mode":"closed","limits":[
	  {"name":"per-ip-short","rps":0.01,"burst":5},{"name":"per-ip-long","rps":0.001,"burst":8}]}]}`)
	stores := []struct {
		name  string
		flags func(t *testing.T) []string
	}{
		{"memory", func(*testing.T) []string { return nil }},
		{"redis", func(t *testing.T) []string {
			return []string{"--redis", startRedisServer(t), "--redis-timeout", "10s"}
		}},
		{"postgres", func(t *testing.T) []string {
			return []string{"--postgres", pgtest.Start(t).DSN(), "--postgres-install", "--postgres-timeout", "10s"}
		}},
	}
	for _, st := range stores {
		t.Run("store="+st.name, func(t *testing.T) {
			flags := append([]string{"--rules", rules}, st.flags(t)...)
			a := startServe(t, flags...)
			b := a
			if st.name != "memory" {
				b = startServe(t, flags...)
			}
			if n := admittedAlternately(t, a, b, 30); n != 5 {
				t.Errorf("admitted %d of 30, want 5 (the tighter limit's burst)", n)
			}
			d := checkVia(t, b, "203.0.113.5")
			if d.Allowed || d.DeniedBy != "per-ip-short" || len(d.Policies) != 2 {
				t.Fatalf("after the burst: %+v, want denied by per-ip-short with two policies", d.Result)
			}
			for _, p := range d.Policies {
				if p.Rule != "per-ip" {
					t.Errorf("policy %s: rule %q, want per-ip", p.Name, p.Rule)
				}
				if p.Name == "per-ip-long" && (p.Remaining < 3 || p.Remaining >= 3.1) {
					t.Errorf("per-ip-long holds %v, want 3 (and its refill): denials took nothing from it", p.Remaining)
				}
			}
			if got := d.Headers["RateLimit-Policy"]; got != `"per-ip-short";q=5;w=500, "per-ip-long";q=8;w=8000` {
				t.Errorf("RateLimit-Policy %q", got)
			}
		})
	}
}
