package main

import (
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/redisstore/redistest"

	"github.com/faucetgo/faucet/cmd/internal/logtest"
	"github.com/faucetgo/faucet/pgstore/pgtest"
)

// waitInstances waits, at most 20 s, until every instance's
// faucet_store_instances gauge reads want.
func waitInstances(t testing.TB, want string, ps ...*proc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range ps {
		for {
			var body string
			if resp, err := testClient.Get(p.adminURL("/metrics")); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
			}
			if strings.Contains(body, "\nfaucet_store_instances "+want+"\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("faucet_store_instances never read %s:\n%s", want, logtest.Grep(body, "faucet_store_instances"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// fallbackRules is one rule without a fail_mode: burst 10, a token per
// 100 s.
const fallbackRules = `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
  "algorithm_config":{"rps":0.01,"burst":10}}]}`

// With the store gone, two instances that counted each other through
// their heartbeats decide in memory at half the limit each: 10 of 30
// checks sent to them in turn are admitted, 5 by each, as many as the
// shared bucket would have admitted, where the old default (fail_mode
// open) admitted all 30. Every answer says the store failed.
func checkFallsBackByDefault(t *testing.T, a, b *proc, down func()) {
	t.Helper()
	waitInstances(t, "2", a, b)
	down()
	admitted := 0
	for i := range 30 {
		p := a
		if i%2 == 1 {
			p = b
		}
		d := checkVia(t, p, "203.0.113.9")
		if !d.StoreError || len(d.Policies) != 1 || !d.Policies[0].Fallback {
			t.Fatalf("check %d with the store down: %+v, want store_error and a fallback decision", i, d.Result)
		}
		if d.Allowed {
			admitted++
		} else if d.Status != 429 {
			t.Errorf("check %d: status %d, want 429 from the fallback", i, d.Status)
		}
	}
	if admitted != 10 {
		t.Errorf("two instances, store down: %d of 30 admitted, want 10 (half of burst 10 each)", admitted)
	}
	for _, p := range []*proc{a, b} {
		_, body := get(t, p.adminURL("/metrics"))
		if !strings.Contains(body, `faucet_fallback_decisions_total{rule="per-ip"} 15`) {
			t.Errorf("metrics:\n%s\nwant 15 fallback decisions", logtest.Grep(body, "faucet_fallback_decisions_total"))
		}
	}
}

func TestServeRedisDownFallsBackByDefault(t *testing.T) {
	addr := startRedisServer(t)
	cli := redistest.Binary(t, "redis-cli")
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, fallbackRules)
	a := startServe(t, "--rules", rules, "--redis", addr)
	b := startServe(t, "--rules", rules, "--redis", addr)
	checkFallsBackByDefault(t, a, b, func() {
		host, port, _ := strings.Cut(addr, ":")
		// SHUTDOWN closes the connection without a reply: its error is
		// expected.
		exec.Command(cli, "-h", host, "-p", port, "SHUTDOWN", "NOSAVE").Run()
	})
}

func TestServePostgresDownFallsBackByDefault(t *testing.T) {
	srv := pgtest.Start(t)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, fallbackRules)
	a := startServe(t, "--rules", rules, "--postgres", srv.DSN(), "--postgres-install")
	b := startServe(t, "--rules", rules, "--postgres", srv.DSN())
	checkFallsBackByDefault(t, a, b, srv.Stop)
}
