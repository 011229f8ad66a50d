package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNewestByRecordedTime: of one day's results, the one recorded last
// is the newest, whatever its commit hash; one without a recorded time is
// older than one with, and a later day wins whatever was recorded.
func TestNewestByRecordedTime(t *testing.T) {
	dir := t.TempDir()
	write := func(name, recorded string) {
		body := "goos: linux\n"
		if recorded != "" {
			body += "recorded: " + recorded + "\n"
		}
		body += "BenchmarkX 1 1 ns/op\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("2026-11-29-ffffff0-http.txt", "")
	write("2026-11-29-0aaaaaa-http.txt", "2026-11-29T16:00:00Z")
	write("2026-11-29-5bbbbbb-http.txt", "2026-11-29T15:00:00Z")
	write("2026-11-28-fffffff-http.txt", "2026-11-28T23:00:00Z")
	if f, _, err := newest(dir, "-http.txt"); err != nil || filepath.Base(f) != "2026-11-29-0aaaaaa-http.txt" {
		t.Errorf("newest = %s, %v; want the one recorded last", f, err)
	}
	write("2026-11-30-0000000-http.txt", "")
	if f, _, err := newest(dir, "-http.txt"); err != nil || filepath.Base(f) != "2026-11-30-0000000-http.txt" {
		t.Errorf("newest = %s, %v; want the later day's", f, err)
	}
}
