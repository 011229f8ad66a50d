package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Only what lies between the markers changes, and writing twice gives the
// same file.
func TestWriteSummaryReplacesBetweenMarkers(t *testing.T) {
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	before := "# faucet\n\nintro\n\n" + beginMarker + "\nold table\n" + endMarker + "\n\n## Install\n"
	if err := os.WriteFile(readme, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := []summaryRow{{what: "one key", faucet: "60.0 ns per check", against: []versus{{peer: "x/time/rate", x: 1.5}},
		section: httpHeading, label: "HTTP", brief: true}}
	for range 2 {
		if err := writeSummary(readme, filepath.Join(dir, "BENCHMARKS.md"), rows); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	want := "# faucet\n\nintro\n\n" + beginMarker + "\n" + readmeTable(rows, "BENCHMARKS.md") + "\n" + endMarker + "\n\n## Install\n"
	if got != want {
		t.Errorf("README after two writes:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "old table") {
		t.Error("the old table is still there")
	}
	if !strings.Contains(got, "| one key | 60.0 ns per check | x/time/rate 1.50× | [HTTP](BENCHMARKS.md#http-faucet-serve-on-loopback) |") {
		t.Errorf("the row does not link into BENCHMARKS.md:\n%s", got)
	}
}

// A file without both markers, once each and in order, is an error that
// names the marker, and the file is left as it was.
func TestWriteSummaryNeedsMarkers(t *testing.T) {
	for name, text := range map[string]string{
		"none":     "# faucet\n",
		"no end":   beginMarker + "\n",
		"no begin": endMarker + "\n",
		"reversed": endMarker + "\n" + beginMarker + "\n",
		"twice":    beginMarker + endMarker + beginMarker + endMarker,
	} {
		t.Run(name, func(t *testing.T) {
			readme := filepath.Join(t.TempDir(), "README.md")
			if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			err := writeSummary(readme, "BENCHMARKS.md", nil)
			if err == nil || !strings.Contains(err.Error(), "bench:summary:") {
				t.Fatalf("writeSummary = %v, want an error naming a marker", err)
			}
			if b, _ := os.ReadFile(readme); string(b) != text {
				t.Errorf("file changed to %q", b)
			}
		})
	}
}
