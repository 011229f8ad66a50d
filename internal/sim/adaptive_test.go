package sim

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// convergenceArgs is the scenario of the convergence test, as faucet sim
// runs it (docs/adaptive.md shows its output): clients offer 1500
// requests a second to an upstream whose capacity drops from 1000 to 200
// at 20 s and comes back at 50 s; the controller keeps the rate from 50
// to 1000 a second with a p99 target of 50 ms, at its defaults otherwise.
var convergenceArgs = []string{"--load", "1500/s", "--burst", "10", "--duration", "90s",
	"--upstream-capacity", "1000,20s=200,50s=1000", "--adaptive-floor", "50", "--adaptive-ceiling", "1000", "--latency-target", "50ms"}

// convergenceRun simulates the scenario of convergenceArgs.
func convergenceRun(t *testing.T) (simConfig, simResult) {
	t.Helper()
	given := map[string]bool{"adaptive-floor": true, "adaptive-ceiling": true}
	a, err := parseAdaptive(adaptiveFlags{capacity: "1000,20s=200,50s=1000", timeout: time.Second, floor: 50, ceiling: 1000, target: 50 * time.Millisecond},
		given, 90*time.Second, 10)
	if err != nil {
		t.Fatal(err)
	}
	a.ctl.Initial = 1000
	cfg := simConfig{rate: 1000, rateText: "1000/s", burst: 10, load: 1500, loadText: "1500/s", cost: 1,
		duration: 90 * time.Second, interval: time.Second, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), adaptive: a}
	res, err := simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, res
}

// The targets of the adaptive controller against an upstream whose
// capacity drops from 1000 to 200 requests a second: the p99 back under
// the target within 10 s of the drop, and the admitted rate over the 10 s
// after that within 20 % of the new capacity, sawtooth and all; and after
// the capacity comes back, the rate at 90 % of it within the time that
// Increase (20/s a step) takes to climb there. On a virtual clock, exact
// every run.
func TestAdaptiveConvergence(t *testing.T) {
	cfg, res := convergenceRun(t)
	rows := res.runs[0].intervals
	s := settlings(cfg, rows)
	if len(s) != 2 {
		t.Fatalf("%d settlings, want one for each of 2 changes of capacity", len(s))
	}
	drop, rise := s[0], s[1]
	if drop.under < 0 || drop.under-drop.change.at > 10*time.Second {
		t.Errorf("p99 under 50ms %v after the drop at %v, want within 10s", drop.under-drop.change.at, drop.change.at)
	}
	if drop.span != settleSpan || drop.admitted < 160 || drop.admitted > 240 {
		t.Errorf("admitted %.1f/s over the %v after the p99 recovered, want 10s within 20 %% of 200/s", drop.admitted, drop.span)
	}
	// The rate climbs from 0.7 of 200 by 20 a step: 38 steps to 900.
	if rise.reach < 0 || rise.reach-rise.change.at > 38*time.Second {
		t.Errorf("rate at 90 %% of 1000/s %v after the rise, want within 38s", rise.reach-rise.change.at)
	}
	// Before the drop, at the ceiling, and long after it, the upstream is
	// healthy and nothing times out; the rate never leaves its bounds.
	for _, r := range rows {
		if r.up.rate < 50 || r.up.rate > 1000 {
			t.Errorf("%v to %v: rate %g outside 50 to 1000", r.start, r.end, r.up.rate)
		}
		if (r.end <= 20*time.Second || r.start >= drop.under) && r.up.failed > 0 {
			t.Errorf("%v to %v: %d timeouts, want none outside the drop", r.start, r.end, r.up.failed)
		}
		if r.end <= 20*time.Second && r.up.p99 > 50*time.Millisecond {
			t.Errorf("%v to %v: p99 %v at full capacity, want under 50ms", r.start, r.end, r.up.p99)
		}
	}
}

// docs/adaptive.md quotes what faucet sim prints for the convergence
// scenario: the quote and the simulator agree.
func TestAdaptiveDocQuotesTheSim(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "adaptive.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "faucet sim "+strings.Join(convergenceArgs, " ")) {
		t.Errorf("docs/adaptive.md does not give the command faucet sim %s", strings.Join(convergenceArgs, " "))
	}
	code, out, errs := runArgs(convergenceArgs...)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "at ") || strings.HasPrefix(line, "controller:") {
			if !strings.Contains(string(doc), line) {
				t.Errorf("docs/adaptive.md lacks the line the simulator prints:\n%s", line)
			}
		}
	}
	// And the rows it quotes are the simulator's.
	row := regexp.MustCompile(`^\s+\d+s\s+\d+s\s+1500\s`)
	rows := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if row.MatchString(line) {
			rows++
			if !strings.Contains(out, line+"\n") {
				t.Errorf("docs/adaptive.md quotes a row the simulator does not print:\n%s", line)
			}
		}
	}
	if rows < 10 {
		t.Errorf("docs/adaptive.md quotes %d rows of the run, want the 13 around the drop", rows)
	}
}

// Every bad flag of an adaptive run is refused before anything is
// simulated, exit status 2, with one line that names the flag and what
// it accepts.
func TestSimAdaptiveErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--upstream-capacity", "fast"}, `faucet sim: --upstream-capacity fast: want a capacity of 0.001 to 1e9 requests per second, such as 200 or 200/s, got "fast"`},
		{[]string{"--upstream-capacity", "0"}, `faucet sim: --upstream-capacity 0: want a capacity of 0.001 to 1e9 requests per second, such as 200 or 200/s, got "0"`},
		{[]string{"--upstream-capacity", "2e9"}, "faucet sim: --upstream-capacity 2e9: want a capacity of 0.001 to 1e9 requests per second, such as 200 or 200/s, got 2e+09/s"},
		{[]string{"--upstream-capacity", "1000,200"}, `faucet sim: --upstream-capacity: want the capacity at the start and AT=CAPACITY for each change, such as 1000,20s=200,40s=1000; got "1000,200"`},
		{[]string{"--upstream-capacity", "1000,20=200"}, `faucet sim: --upstream-capacity 20=200: AT: want a duration such as 20s, got "20"`},
		{[]string{"--upstream-capacity", "1000,0s=200"}, "faucet sim: --upstream-capacity 0s=200: AT must be more than 0 and at most --duration (5s), got 0s"},
		{[]string{"--upstream-capacity", "1000,6s=200"}, "faucet sim: --upstream-capacity 6s=200: AT must be more than 0 and at most --duration (5s), got 6s"},
		{[]string{"--upstream-capacity", "1000,2s=200,2s=300"}, "faucet sim: --upstream-capacity 2s=300: 2s is given twice; give one capacity per time"},
		{[]string{"--upstream-capacity", "1000", "--upstream-timeout", "0s"}, "faucet sim: --upstream-timeout must be more than 0 and at most 1h, got 0s"},
		{[]string{"--upstream-capacity", "1000", "--adaptive-ceiling", "0"}, "faucet sim: --adaptive-ceiling must be more than 0 and at most 1e9 tokens per second, got 0"},
		{[]string{"--upstream-capacity", "1000", "--adaptive-ceiling", "2e9"}, "faucet sim: --adaptive-ceiling must be more than 0 and at most 1e9 tokens per second, got 2e+09"},
		{[]string{"--upstream-capacity", "1000", "--adaptive-floor", "-1"}, "faucet sim: --adaptive-floor must be more than 0 and at most --adaptive-ceiling (1000), got -1"},
		{[]string{"--upstream-capacity", "1000", "--adaptive-floor", "2000"}, "faucet sim: --adaptive-floor must be more than 0 and at most --adaptive-ceiling (1000), got 2000"},
		{[]string{"--upstream-capacity", "1000", "--adaptive-floor", "1e-9"}, "faucet sim: --adaptive-floor 1e-09: engine: invalid config: Limit must be between 1/31622400"},
		{[]string{"--upstream-capacity", "1000", "--latency-target", "0s"}, "faucet sim: --latency-target must be more than 0 and at most 1m, got 0s"},
		{[]string{"--upstream-capacity", "1000", "--latency-target", "2m"}, "faucet sim: --latency-target must be more than 0 and at most 1m, got 2m0s"},
		{[]string{"--upstream-capacity", "1000", "--decrease", "1"}, "faucet sim: --decrease must be between 0 and 1, both excluded, got 1"},
		{[]string{"--upstream-capacity", "1000", "--decrease", "0"}, "faucet sim: --decrease must be between 0 and 1, both excluded, got 0"},
		{[]string{"--upstream-capacity", "1000", "--increase", "0"}, "faucet sim: --increase must be more than 0 and at most --adaptive-ceiling (1000) tokens per second, got 0"},
		{[]string{"--upstream-capacity", "1000", "--increase", "1001"}, "faucet sim: --increase must be more than 0 and at most --adaptive-ceiling (1000) tokens per second, got 1001"},
		{[]string{"--upstream-capacity", "1000", "--rate", "10"}, "faucet sim: --rate, the adaptive rate at the start, must be from --adaptive-floor (50) to --adaptive-ceiling (1000), got 10"},
		{[]string{"--upstream-capacity", "1000", "--set-limit", "1s=5"}, "faucet sim: --set-limit: an adaptive run (--upstream-capacity) simulates the token bucket alone, its rate set by the controller"},
		{[]string{"--upstream-capacity", "1000", "--quota", "5"}, "faucet sim: --quota: an adaptive run (--upstream-capacity) simulates the token bucket alone"},
		{[]string{"--latency-target", "20ms"}, "faucet sim: --latency-target sets the adaptive controller: give --upstream-capacity too"},
		{[]string{"--adaptive-floor", "20"}, "faucet sim: --adaptive-floor sets the adaptive controller: give --upstream-capacity too"},
	} {
		args := append([]string{"--duration", "5s"}, tt.args...)
		code, out, errs := runArgs(args...)
		if code != 2 || out != "" || !strings.HasPrefix(errs, tt.msg) || strings.Count(errs, "\n") != 1 {
			t.Errorf("faucet sim %q: exit %d, stdout %.40q, stderr %q; want exit 2, no output, one line starting %q", args, code, out, errs, tt.msg)
		}
	}
	// The bounds themselves are legal.
	for _, args := range [][]string{
		{"--upstream-capacity", "1000", "--adaptive-floor", "1000", "--increase", "1000", "--decrease", "0.999", "--latency-target", "1m"},
		{"--upstream-capacity", "0.001,1s=1e9", "--adaptive-ceiling", "1", "--adaptive-floor", "1", "--rate", "1", "--load", "2/s"},
	} {
		if code, _, errs := runArgs(append([]string{"--duration", "5s"}, args...)...); code != 0 || errs != "" {
			t.Errorf("faucet sim %q: exit %d, stderr %q", args, code, errs)
		}
	}
}

// An adaptive run's report: the head names the controller and the
// upstream; each row has the rate, the capacity, the p99 and the timeouts.
func TestSimAdaptiveReport(t *testing.T) {
	code, out, errs := runArgs(convergenceArgs...)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{
		"adaptive rate 50/s to 1000/s (from 1000/s), p99 target 50ms, burst 10, load 1500/s (cost 1), 1m30s in steps of 1s\n" +
			"upstream capacity 1000/s, from 20s 200/s, from 50s 1000/s, timeout 1s\n",
		"   from     to    sent  admitted  denied  rate/s  capacity/s      p99  timeouts\n",
		"token bucket: adaptive rate 50/s to 1000/s, burst 10: admitted ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The interval of the drop: the rate still 1000/s, the capacity 200/s,
	// the queue filling up to the timeout.
	if !regexp.MustCompile(`(?m)^\s+20s\s+21s\s+1500\s+\d+\s+\d+\s+1000\s+200\s+[\d.]+ms\s+\d+\s*$`).MatchString(out) {
		t.Errorf("no row for 20s to 21s with the rate at 1000/s and the capacity at 200/s:\n%s", out)
	}
}
