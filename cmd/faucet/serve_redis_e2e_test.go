package main

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// startRedisServer runs redis-server without persistence on a free loopback
// port until the test ends (redistest.Start). Without the binary the test
// skips, or fails when FAUCET_REQUIRE_REDIS=1.
func startRedisServer(t *testing.T) string {
	t.Helper()
	return redistest.Start(t).Addr()
}

// checkVia posts one check for ip to p's check API and returns the decision.
func checkVia(t *testing.T, p *proc, ip string) httplimit.CheckResponse {
	t.Helper()
	resp, err := testClient.Post(p.url("/v1/check"), "application/json", strings.NewReader(`{"ip":"`+ip+`","path":"/x"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/check: %s", resp.Status)
	}
	var out httplimit.CheckResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// admittedAlternately sends n checks of one client to a and b in turn and
// returns how many were admitted; every denial must be a 429 with a
// Retry-After in whole seconds, and a store failure fails the test.
func admittedAlternately(t *testing.T, a, b *proc, n int) int {
	t.Helper()
	admitted := 0
	for i := range n {
		p := a
		if i%2 == 1 {
			p = b
		}
		d := checkVia(t, p, "203.0.113.5")
		switch {
		case d.Allowed:
			admitted++
		case d.Reason == httplimit.ReasonStoreUnavailable:
			t.Fatalf("check %d: the store failed (status %d): an error or no answer within the store's timeout", i, d.Status)
		case d.Status != 429 || d.Headers["Retry-After"] == "":
			t.Errorf("check %d denied with status %d, Retry-After %q; want 429 and a wait in seconds", i, d.Status, d.Headers["Retry-After"])
		default:
			if s, err := strconv.Atoi(d.Headers["Retry-After"]); err != nil || s < 1 {
				t.Errorf("check %d: Retry-After %q, want a wait in whole seconds", i, d.Headers["Retry-After"])
			}
		}
	}
	return admitted
}

// Two faucet serve instances with the same rules and --redis enforce one
// limit between them: burst 10 at 1 token per 100 s admits exactly 10 of 30
// requests sent to them in turn, and denies the rest with 429 and
// Retry-After. Without --redis each instance has its own buckets and the
// same requests get 20 through.
//
// A Redis call that outlives --redis-timeout is decided by fail_mode, and
// failing open would show up only as too many admissions (once 11 of 30 on
// a cold, loaded machine, at the 100 ms default). So the deadline here is
// one no healthy call misses, and the rule fails closed: a store failure is
// reported as such.
func TestServeRedisSharedLimitEndToEnd(t *testing.T) {
	addr := startRedisServer(t)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
	  "algorithm_config":{"rps":0.01,"burst":10},"fail_mode":"closed"}]}`)
	admitted := func(a, b *proc) int { return admittedAlternately(t, a, b, 30) }
	a := startServe(t, "--rules", rules, "--redis", addr, "--redis-timeout", "10s")
	b := startServe(t, "--rules", rules, "--redis", addr, "--redis-timeout", "10s")
	if n := admitted(a, b); n != 10 {
		t.Errorf("two instances sharing Redis admitted %d of 30, want 10 (one burst)", n)
	}
	// Another prefix is another set of buckets.
	c := startServe(t, "--rules", rules, "--redis", addr, "--redis-timeout", "10s", "--redis-prefix", "other:")
	if n := admitted(c, c); n != 10 {
		t.Errorf("an instance under another prefix admitted %d of 30, want its own burst of 10", n)
	}
	// With --lease the two instances decide from leases, and still admit
	// one burst between them, with nothing stranded in a lease: each
	// ends the one in hand when it asks for the next.
	la := startServe(t, "--rules", rules, "--redis", addr, "--redis-timeout", "10s", "--redis-prefix", "leased:", "--lease")
	lb := startServe(t, "--rules", rules, "--redis", addr, "--redis-timeout", "10s", "--redis-prefix", "leased:", "--lease")
	if n := admitted(la, lb); n != 10 {
		t.Errorf("two leasing instances admitted %d of 30, want 10 (one burst)", n)
	}
	d := startServe(t, "--rules", rules)
	e := startServe(t, "--rules", rules)
	if n := admitted(d, e); n != 20 {
		t.Errorf("two instances with in-memory buckets admitted %d of 30, want 20 (a burst each)", n)
	}
}

// Redis flags are checked before anything starts, and an unreachable server
// fails the start with the address in the message.
func TestServeRedisBadFlags(t *testing.T) {
	code, _, errs := runArgs("serve", "--redis", "localhost", "--redis-timeout", "0s", "--redis-prefix", "{x}",
		"--redis-fallback-share", "2", "--lease-lifetime", "1ms", "--validate")
	for _, want := range []string{`--redis: "localhost" is not host:port`, "--redis-timeout: must be positive",
		"--redis-prefix: must be non-empty, without '{' or '}'", "--redis-fallback-share: must be in (0, 1]",
		"--lease-lifetime: only means something with --lease", "--lease-lifetime: must be at least 10ms"} {
		if !strings.Contains(errs, want) {
			t.Errorf("output lacks %q:\n%s", want, errs)
		}
	}
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if code, _, errs := runArgs("serve", "--redis-prefix", "x:", "--validate"); code != 2 || !strings.Contains(errs, "only mean something with --redis") {
		t.Errorf("--redis-prefix without --redis: exit %d, %q", code, errs)
	}
	// A port nothing listens on: the listener is closed before use.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	if code, _, errs := runArgs("serve", "--redis", dead, "--listen", "127.0.0.1:0"); code == 0 || !strings.Contains(errs, dead) {
		t.Errorf("unreachable Redis: exit %d, %q; want a failed start naming %s", code, errs, dead)
	}
}
