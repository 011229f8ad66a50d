package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The section has a row of figures per run and change of capacity, the
// old capacity read from the second before the change, "–" where the run
// ended too soon for a figure, and the seconds around the changes with
// every run side by side and a gap between the windows.
func TestAdaptiveSection(t *testing.T) {
	dir := t.TempDir()
	var raw strings.Builder
	raw.WriteString("goos: linux\nrecorded: 2026-11-29T22:00:00Z\n" +
		`rule: {"rules":[{"name":"upstream"}]}` + "\n# load average at start: 1.00 1.00 1.00\n")
	for _, q := range []string{"65536", "100"} {
		for s := range 40 {
			c := 1000
			if s >= 10 && s < 30 {
				c = 200
			}
			fmt.Fprintf(&raw, "BenchmarkAdaptiveSecond/queue=%s/t=%02d 1 %d capacity/s 500 rate/s 1500 sent/s 180 admitted/s 1320 denied/s 180 ok/s 180 served/s 0 abandoned/s 12.5 upstream-p99-ms\n", q, s, c)
		}
	}
	raw.WriteString("BenchmarkAdaptive/queue=65536/change=drop/at=10s 1 200 capacity/s 5 settle-s 134.2 admitted/s 134.3 served/s 67.1 pct-of-capacity\n")
	raw.WriteString("BenchmarkAdaptive/queue=65536/change=rise/at=30s 1 1000 capacity/s 1 settle-s -1 reach90-s\n")
	raw.WriteString("BenchmarkAdaptive/queue=100/change=drop/at=10s 1 200 capacity/s -1 settle-s\n")
	raw.WriteString("# load average at end: 1.00 1.00 1.00\n")
	if err := os.WriteFile(filepath.Join(dir, "2026-11-29-abc1234-adaptive.txt"), []byte(raw.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := adaptiveSection(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## " + adaptiveHeading + "\n",
		"Rule: `{\"rules\":[{\"name\":\"upstream\"}]}`.",
		"| 65536 | 1000 → 200/s at 10 s | 5 s after | 134.2/s | 67.1 % | 134.3/s | – |\n",
		"| 65536 | 200 → 1000/s at 30 s | 1 s after | – | – | – | not within the run |\n",
		"| 100 | 1000 → 200/s at 10 s | never, within the run | – | – | – | – |\n",
		"| s | capacity | queue 65536: rate | admitted | p99 | queue 100: rate | admitted | p99 |\n",
		"| 8 | 1000 | 500 | 180 | 12.5 | 500 | 180 | 12.5 |\n",
		"| 25 | 200 |",
		"| … |",
		"| 28 | 200 |",
		"| 39 | 1000 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"| 7 | ", "| 26 | ", "| 27 | "} {
		if strings.Contains(got, unwanted) {
			t.Errorf("section has %q, outside the windows around the changes:\n%s", unwanted, got)
		}
	}
	if got, err := adaptiveSection(t.TempDir()); got != "" || err != nil {
		t.Errorf("without results: %q, %v; want nothing", got, err)
	}
}
