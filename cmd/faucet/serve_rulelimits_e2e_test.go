package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// A calendar quota through serve, on every store: the check API admits
// the quota, then denies with quota_exceeded and a Retry-After at the
// renewal (jittered by at most 5 minutes); two instances on a shared store
// share the quota. A strict window on a shared store fails the start,
// naming the limit.
func TestServeQuotaEndToEnd(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"fail_mode":"closed","limits":[
	  {"name":"per-ip-second","rps":100,"burst":100},
	  {"name":"per-ip-day","quota":3,"period":"day","time_zone":"Pacific/Kiritimati"}]}]}`)
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
			if n := admittedAlternately(t, a, b, 6); n != 3 {
				t.Errorf("admitted %d of 6, want the day's quota, 3", n)
			}
			d := checkVia(t, b, "203.0.113.5")
			// Kiritimati is UTC+14: its midnight is 10:00 UTC.
			now := time.Now().UTC()
			renewal := time.Date(now.Year(), now.Month(), now.Day(), 10, 0, 0, 0, time.UTC)
			if !now.Before(renewal) {
				renewal = renewal.Add(24 * time.Hour)
			}
			wait := renewal.Sub(now).Seconds()
			ra, _ := strconv.ParseFloat(d.Headers["Retry-After"], 64)
			if d.Allowed || d.DeniedBy != "per-ip-day" || d.Reason != "quota_exceeded" || ra < wait-5 || ra > wait+305 {
				t.Fatalf("after the quota: %+v, Retry-After %v; want quota_exceeded until the renewal in %v s", d.Result, ra, wait)
			}
			if got := d.Headers["RateLimit-Policy"]; got != `"per-ip-second";q=100;w=1, "per-ip-day";q=3;w=86400` {
				t.Errorf("RateLimit-Policy %q", got)
			}
		})
	}
	window := filepath.Join(t.TempDir(), "window.json")
	writeRules(t, window, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"limits":[
	  {"name":"per-ip-hour","limit":10,"window":"1h"}]}]}`)
	code, _, errs := runArgs("serve", "--rules", window, "--redis", startRedisServer(t), "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(errs, "per-ip-hour") || !strings.Contains(errs, "strict windows") {
		t.Errorf("a window on Redis: exit %d, %q; want a failed start naming the limit", code, errs)
	}
}
