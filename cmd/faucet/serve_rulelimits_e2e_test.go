package main

import (
	"path/filepath"
	"strconv"
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
// share the quota, and a strict window.
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
	// A strict window, with a token bucket, on each shared store: two
	// instances admit the window's limit between them, and then deny
	// with window_exceeded until its oldest slot leaves (within the hour
	// and a slot, and Retry-After's jitter of at most 5 minutes).
	window := filepath.Join(t.TempDir(), "window.json")
	writeRules(t, window, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"fail_mode":"closed","limits":[
	  {"name":"per-ip-second","rps":100,"burst":100},
	  {"name":"per-ip-hour","limit":4,"window":"1h"}]}]}`)
	for _, st := range stores[1:] {
		t.Run("window,store="+st.name, func(t *testing.T) {
			flags := append([]string{"--rules", window}, st.flags(t)...)
			a, b := startServe(t, flags...), startServe(t, flags...)
			if n := admittedAlternately(t, a, b, 8); n != 4 {
				t.Errorf("admitted %d of 8, want the window's limit, 4", n)
			}
			d := checkVia(t, a, "203.0.113.5")
			ra, _ := strconv.ParseFloat(d.Headers["Retry-After"], 64)
			if d.Allowed || d.DeniedBy != "per-ip-hour" || d.Reason != "window_exceeded" || ra < 3600-5 || ra > 3600+225+305 {
				t.Fatalf("after the window's limit: %+v, Retry-After %v; want window_exceeded for about an hour", d.Result, ra)
			}
		})
	}
}
