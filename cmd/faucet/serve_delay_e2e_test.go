package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// delayRules: "smooth" spaces a key's requests 50 ms apart, waiting up to
// 2 s; "patient", on /patient/, 200 ms apart, waiting up to 10 s.
const delayRules = `{"rules":[
  {"name":"patient","match":{"path_prefix":"/patient/"},"limit_keys":["header:X-Key"],
   "algorithm_config":{"rps":5,"burst":1},"delay":{"max_delay":"10s"}},
  {"name":"smooth","limit_keys":["header:X-Key"],"algorithm_config":{"rps":20,"burst":1},"delay":{"max_delay":"2s"}}]}`

// A rule in delay mode holds the requests over its rate until their turn
// instead of denying them: 20 sent at once all pass, reaching the upstream
// 50 ms apart; those that would wait past max_delay get 429.
func TestServeDelaySpacesRequests(t *testing.T) {
	up := newTestUpstream(t, 0)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, delayRules)
	p := startServe(t, "--rules", rules, "--upstream", up.URL)
	client := burstClient(20 * time.Second)

	for i, a := range together(20, client, p.url("/a"), "X-Key", "a") {
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("request %d of 20: %d, reason %q, %v; want 200", i, a.status, a.reason, a.err)
		}
	}
	at := up.times()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	// Their tokens were due 50 ms apart from the first: however late
	// each was sent on a loaded machine, none reached the upstream
	// sooner. No upper bound: the machine may be slow.
	if span, least := at[len(at)-1].Sub(at[0]), 19*50*time.Millisecond*85/100; len(at) != 20 || span < least {
		t.Errorf("the upstream got %d requests over %v, want 20 over at least %v", len(at), span, least)
	}
	if n := metric(t, p, `faucet_delayed_total{rule="smooth"}`); n < 5 {
		t.Errorf(`faucet_delayed_total{rule="smooth"} %v, want most of the 19 that waited`, n)
	}

	// 60 at once: about 2 s of them fit (41), the others are denied.
	admitted, denied := 0, 0
	for i, a := range together(60, client, p.url("/b"), "X-Key", "b") {
		switch {
		case a.err != nil:
			t.Fatalf("request %d of 60: %v", i, a.err)
		case a.status == http.StatusOK:
			admitted++
		case a.status == http.StatusTooManyRequests && a.retryAfter != "":
			denied++
		default:
			t.Errorf("request %d of 60: %d, Retry-After %q; want 200, or 429 with a Retry-After", i, a.status, a.retryAfter)
		}
	}
	if admitted < 40 || denied < 1 {
		t.Errorf("60 at once: %d admitted, %d denied; want the 41 that fit in max_delay 2s admitted (or more, as the bucket refills), and some denied", admitted, denied)
	}
	if n := pollMetric(t, p, "faucet_delay_waiting", func(v float64) bool { return v == 0 }); n != 0 {
		t.Errorf("faucet_delay_waiting %v once every request was answered, want 0", n)
	}
}

// A client that leaves while its request waits gives its turn back: the
// next request of its key does not wait behind it.
func TestServeDelayCancelledWaitGivesBack(t *testing.T) {
	if testEngine() == "fasthttp" {
		t.Skip("fasthttp does not tell a handler that its client left: the request waits its turn out (docs/serve.md)")
	}
	up := newTestUpstream(t, 0)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, delayRules)
	p := startServe(t, "--rules", rules, "--upstream", up.URL)
	if resp, _ := get(t, p.url("/patient/0"), "X-Key", "c"); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d, want 200 (the burst)", resp.StatusCode)
	}
	// 30 more reserve turns 200 ms apart, to 6 s ahead; their clients
	// leave after 300 ms.
	sent := time.Now()
	left := 0
	for _, a := range together(30, burstClient(300*time.Millisecond), p.url("/patient/1"), "X-Key", "c") {
		if a.err != nil {
			left++
		}
	}
	if left < 20 {
		t.Fatalf("%d of 30 clients gave up after 300 ms, want most (their turns were up to 6 s ahead)", left)
	}
	if n := pollMetric(t, p, "faucet_delay_cancelled_total", func(v float64) bool { return v >= float64(left) }); n < float64(left) {
		t.Fatalf("faucet_delay_cancelled_total %v, want the %d that left", n, left)
	}
	// Had the turns not been given back, the next one would be about
	// 6 s after sent.
	start := time.Now()
	resp, _ := get(t, p.url("/patient/2"), "X-Key", "c")
	waited := time.Since(start)
	if since := time.Since(sent); since > 3*time.Second {
		t.Skipf("the machine took %v to get here: the next turn without the give-back would be too close to tell", since)
	}
	if resp.StatusCode != http.StatusOK || waited > 3*time.Second {
		t.Errorf("the request after those that left: %d after %v; want 200 within 3 s (the turns given back), not at about 6 s", resp.StatusCode, waited)
	}
	if n := pollMetric(t, p, "faucet_delay_waiting", func(v float64) bool { return v == 0 }); n != 0 {
		t.Errorf("faucet_delay_waiting %v at the end, want 0", n)
	}
}

// The check API only decides: a rule in delay mode answers delay_ms, the
// caller's to wait, and an in-flight limit, whose end the check API never
// sees, is refused at start.
func TestServeDelayCheckAPI(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"smooth","limit_keys":["ip:address"],"algorithm_config":{"rps":20,"burst":1},"delay":{"max_delay":"2s"}}]}`)
	p := startServe(t, "--rules", rules)
	var delays []int64
	for range 3 {
		resp, err := testClient.Post(p.url("/v1/check"), "application/json", strings.NewReader(`{"ip":"198.51.100.7","path":"/x"}`))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Allowed bool  `json:"allowed"`
			DelayMS int64 `json:"delay_ms"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || !out.Allowed {
			t.Fatalf("check: allowed %v, %v; want allowed", out.Allowed, err)
		}
		delays = append(delays, out.DelayMS)
	}
	// Each check reserves a turn 50 ms after the last; the time between
	// checks brings them closer, never later.
	if delays[0] != 0 || delays[1] < 1 || delays[1] > 50 || delays[2] <= delays[1] || delays[2] > 100 {
		t.Errorf("delay_ms of three checks at once: %v; want 0, then up to 50, then more, up to 100", delays)
	}

	inflight := filepath.Join(dir, "inflight.json")
	writeRules(t, inflight, inFlightRules)
	code, errs := runServe(t, "--rules", inflight, "--listen", "127.0.0.1:0", "--admin-listen", "")
	if code != 2 || !strings.Contains(errs, `rule "conc" (rules[0]): algorithm: an in-flight limit needs to see its requests end, and this server only checks them (the check API)`) {
		t.Errorf("in-flight limit under the check API: exit %d, stderr %q; want 2 and the refusal", code, errs)
	}
}

// Bounds that serve's flags set: a max_delay the timeouts leave no room
// for is refused at start and at a reload, naming the flags; --max-waiting
// must leave connections for requests that do not wait.
func TestServeDelayBoundsRefused(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"smooth","limit_keys":["ip:address"],"algorithm_config":{"rps":20,"burst":1},"delay":{"max_delay":"2s"}}]}`)
	flags := []string{"--upstream", "http://127.0.0.1:1", "--write-timeout", "2s", "--upstream-timeout", "500ms"}
	why := `rule "smooth" (rules[0]): delay.max_delay: must be from 1ms to 1.5s (the longest a request may wait here), got 2s (1.5s is --write-timeout (2s) less --upstream-timeout (500ms)`
	code, errs := runServe(t, append([]string{"--rules", rules, "--listen", "127.0.0.1:0", "--admin-listen", ""}, flags...)...)
	if code != 2 || !strings.Contains(errs, why) {
		t.Errorf("max_delay above --write-timeout less --upstream-timeout: exit %d, stderr %q; want 2 and %q", code, errs, why)
	}
	code, errs = runServe(t, "--upstream", "http://127.0.0.1:1", "--max-conns", "100", "--max-waiting", "100", "--listen", "127.0.0.1:0")
	if want := "--max-waiting: must be from 1 to 99, below --max-conns (100)"; code != 2 || !strings.Contains(errs, want) {
		t.Errorf("--max-waiting at --max-conns: exit %d, stderr %q; want 2 and %q", code, errs, want)
	}

	// At a reload: the rules in force stay, and the log says why.
	writeRules(t, rules, `{"rules":[{"name":"smooth","limit_keys":["ip:address"],"algorithm_config":{"rps":20,"burst":1},"delay":{"max_delay":"1s"}}]}`)
	p := startServe(t, append([]string{"--rules", rules, "--watch", "100ms"}, flags...)...)
	writeRules(t, rules, `{"rules":[{"name":"smooth","limit_keys":["ip:address"],"algorithm_config":{"rps":20,"burst":1},"delay":{"max_delay":"2s"}}]}`)
	p.waitFor(t, regexp.MustCompile(`reload failed.*delay\.max_delay.*--write-timeout \(2s\) less --upstream-timeout \(500ms\)`))
}

// In-flight limits and delay mode keep their state in this process: with
// a store shared by several instances, serve refuses to start with them.
func TestServeDelayRefusedOnSharedStore(t *testing.T) {
	addr := startRedisServer(t)
	dir := t.TempDir()
	for _, c := range []struct{ rules, want string }{
		{`{"rules":[{"name":"smooth","limit_keys":["ip:address"],"algorithm_config":{"rps":20,"burst":1},"delay":{"max_delay":"1s"}}]}`,
			`delay mode reserves tokens ahead, which only the in-memory store can`},
		{adaptiveRules, `an adaptive rate changes the limit in place, which only the in-memory store can`},
	} {
		rules := filepath.Join(dir, "rules.json")
		writeRules(t, rules, c.rules)
		code, errs := runServe(t, "--rules", rules, "--upstream", "http://127.0.0.1:1", "--redis", addr, "--listen", "127.0.0.1:0", "--admin-listen", "")
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("--redis: exit %d, stderr %q; want 1 and %q", code, errs, c.want)
		}
	}
}

// runServe runs faucet serve with args until it exits, for at most 30 s,
// and returns its exit status and stderr.
func runServe(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, faucetBinary(t), append([]string{"serve"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}
