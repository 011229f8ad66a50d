package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const adaptiveRules = `{"rules":[{"name":"upstream","limit_keys":["global"],
  "algorithm_config":{"rps":400,"burst":400},
  "adaptive":{"floor":20,"latency_target":"100ms","increase":100}}]}`

// An adaptive rate in front of an upstream whose latency the test
// controls: it falls when the upstream slows past the target, and climbs
// back to the rule's rate once it is fast again; the metric shows it.
func TestServeAdaptiveRate(t *testing.T) {
	skipShort(t)
	up := newTestUpstream(t, 5*time.Millisecond)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, adaptiveRules)
	p := startServe(t, "--rules", rules, "--upstream", up.URL, "--upstream-timeout", "2s", "--write-timeout", "5s")
	rate := `faucet_adaptive_rate{rule="upstream"}`
	if v := metric(t, p, rate); v != 400 {
		t.Fatalf("%s %v at the start, want 400", rate, v)
	}

	// Eight clients send until the test ends (at most 60 s).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	client := &http.Client{Timeout: 10 * time.Second}
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				r, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url("/load"), nil)
				resp, err := client.Do(r)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}

	up.latency.Store(int64(300 * time.Millisecond))
	if v := pollMetric(t, p, rate, func(v float64) bool { return v < 400 }); v >= 400 || v < 20 {
		t.Fatalf("%s %v while the upstream answers in 300 ms, want below 400 and at least the floor 20", rate, v)
	}
	resp, err := http.Get(p.url("/policy"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("RateLimit-Policy"); got == `"upstream";q=400;w=1` || got == "" {
		t.Errorf("RateLimit-Policy %q with the rate lowered, want a longer w", got)
	}

	up.latency.Store(int64(5 * time.Millisecond))
	// Up to 30 s: a few steps to gather evidence at the floor, then 100 a
	// step.
	v := pollMetric(t, p, rate, func(v float64) bool { return v == 400 })
	if v != 400 {
		v = pollMetric(t, p, rate, func(v float64) bool { return v == 400 })
	}
	if v != 400 {
		t.Errorf("%s %v after the upstream is fast again, want back at 400", rate, v)
	}
}
