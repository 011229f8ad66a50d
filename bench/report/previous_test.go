package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Runs of one day are ordered by the time in their meta file, not by name
// (which sorts them by commit hash).
func TestPreviousRunOrdersByDate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct{ prefix, date string }{
		{"2026-11-24-aaaaaaa", "2026-11-24 10:00 UTC"},
		{"2026-11-25-eeeeeee", "2026-11-25 00:03 UTC"},
		{"2026-11-25-1111111", "2026-11-25 03:10 UTC"},
		{"2026-11-25-9999999", "2026-11-25 01:00 UTC"}, // no profile
	} {
		write(r.prefix+"-meta.txt", "go:      go1.26\ndate:    "+r.date+"\n")
		if r.prefix != "2026-11-25-9999999" {
			write(r.prefix+"-profile-many.txt", "flat\n")
		}
	}
	cases := map[string]string{
		"2026-11-25-1111111": "2026-11-25-eeeeeee",
		"2026-11-25-eeeeeee": "2026-11-24-aaaaaaa",
		"2026-11-24-aaaaaaa": "",
	}
	for cur, want := range cases {
		got := previousRun(filepath.Join(dir, cur), "-profile-many.txt")
		if want != "" {
			want = filepath.Join(dir, want)
		}
		if got != want {
			t.Errorf("previousRun(%s) = %q, want %q", cur, got, want)
		}
	}
}
