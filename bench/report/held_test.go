package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The section has a row per case of BenchmarkHandlerHeld, medians against
// the plain token bucket's, the held=1 cases apart from the others, and a
// row per unit of BenchmarkDelayWaiting, with the range of the runs.
func TestHeldSection(t *testing.T) {
	dir := t.TempDir()
	raw := `recorded: 2026-11-29T22:00:00Z
goos: linux
goarch: amd64
pkg: github.com/faucetgo/faucet/httplimit
cpu: AMD EPYC
BenchmarkHandlerHeld/rule=plain-2 1000 500 ns/op 0 B/op 0 allocs/op
BenchmarkHandlerHeld/rule=in_flight-2 1000 700 ns/op 64 B/op 3 allocs/op
BenchmarkHandlerHeld/rule=in_flight/held=1-2 1000 450 ns/op 0 B/op 0 allocs/op
BenchmarkHandlerHeld/rule=delay-2 1000 600 ns/op 8 B/op 0 allocs/op
BenchmarkHandlerHeld/rule=plain-2 1000 520 ns/op 0 B/op 0 allocs/op
BenchmarkHandlerHeld/rule=in_flight-2 1000 720 ns/op 64 B/op 3 allocs/op
BenchmarkHandlerHeld/rule=in_flight/held=1-2 1000 470 ns/op 0 B/op 0 allocs/op
BenchmarkHandlerHeld/rule=delay-2 1000 620 ns/op 8 B/op 0 allocs/op
BenchmarkDelayWaiting-2 1 4800 B/waiter 0 goroutines/waiter 700 heap-B/waiter 4100 stack-B/waiter
BenchmarkDelayWaiting-2 1 4900 B/waiter 0 goroutines/waiter 800 heap-B/waiter 4100 stack-B/waiter
BenchmarkDelayWaiting-2 1 5000 B/waiter 0 goroutines/waiter 900 heap-B/waiter 4100 stack-B/waiter
`
	if err := os.WriteFile(filepath.Join(dir, "2026-11-29-abc1234-held.txt"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := heldSection(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## " + heldHeading + "\n",
		"| plain | a token bucket alone | 510.0 ns | 1.00× | 0 | 0 |\n",
		"| in_flight | an in-flight limit, the key's only request | 710.0 ns | 1.39× | 64 | 3 |\n",
		"| in_flight, held=1 | an in-flight limit, another request of the key in flight | 460.0 ns | 0.90× | 0 | 0 |\n",
		"| delay | a token bucket in delay mode, no wait | 610.0 ns | 1.20× | 8 | 0 |\n",
		"medians of 3 runs",
		"| bytes (heap and stack) | 4900 | 4800 – 5000 |\n",
		"| heap bytes | 800 | 700 – 900 |\n",
		"| goroutines | 0.00 | 0.00 – 0.00 |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| delay_and_in_flight |") {
		t.Errorf("a case without results has a row:\n%s", got)
	}
	if got, err := heldSection(t.TempDir()); got != "" || err != nil {
		t.Errorf("without results: %q, %v; want nothing", got, err)
	}
}
