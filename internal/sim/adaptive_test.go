package sim

import (
	"os"
	"path/filepath"
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
}
