package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// GitHub's fragments: lower case, punctuation dropped, each space a hyphen
// (so "s = 1.1" keeps two).
func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"HTTP: faucet serve on loopback":                                 "http-faucet-serve-on-loopback",
		"scen=zipf: the same 1e6 keys, Zipf-distributed order (s = 1.1)": "scenzipf-the-same-1e6-keys-zipf-distributed-order-s--11",
		"The limiter alone: httplimit's BenchmarkCheck":                  "the-limiter-alone-httplimits-benchmarkcheck",
		"faucet_leased p99":                                              "faucet_leased-p99",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// Every ratio reads the same way, above 1 where faucet does better: a peer
// twice as slow or twice as large is 2×, whatever the unit.
func TestSummaryRatiosFavourFaucetAboveOne(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "2026-11-29-abc1234")
	write := func(name, body string) {
		if err := os.WriteFile(prefix+name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("-allow.txt", `BenchmarkAllow/impl=faucet/scen=hot/mode=allow-2 100 50 ns/op
BenchmarkAllow/impl=xtime/scen=hot/mode=allow-2 100 100 ns/op
BenchmarkAllow/impl=juju/scen=hot/mode=allow-2 100 25 ns/op
`)
	write("-memory.txt", `BenchmarkMemory/impl=faucet-2 1 40 B/key
BenchmarkMemory/impl=sethvargo-2 1 120 B/key
`)
	if err := os.WriteFile(filepath.Join(dir, "2026-11-29-abc1234-redis.txt"), []byte(`BenchmarkRedis/impl=faucet/callers=64-2 1 1000 checks/s
BenchmarkRedis/impl=redis_rate/callers=64-2 1 250 checks/s
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := summarize(prefix)
	if err != nil {
		t.Fatal(err)
	}
	table := summaryTable(rows, "")
	for _, want := range []string{
		"| one key, one goroutine | 50.0 ns per check | x/time/rate 2.00×, juju/ratelimit 0.50× | [scen=hot, mode=allow](#scenhot-one-key-one-goroutine) |",
		"| memory per live key at 1e6 keys | 40.0 B | sethvargo/go-limiter 3.00× | [memory](#memory-per-live-key-at-1e6-keys) |",
		"| Redis store, 64 callers | 1000 checks/s | go-redis/redis_rate 4.00× | [Redis](#redis-one-limit-shared-through-one-local-server) |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("summary lacks\n%s\nin\n%s", want, table)
		}
	}
}
