package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The section has a row per store and mode, medians with the worst run in
// brackets: the most admitted over the bound, the least share of the rate,
// the most store errors.
func TestSharedloadSection(t *testing.T) {
	dir := t.TempDir()
	raw := `postgres: 18.1
redis: 7.2.4
note: 4 faucet serve instances on one store, 16 clients each on one API key, 100/s burst 100, 8s per run; the store, the instances and the clients share the machine's cores
# load average at start: 1.00 0.50 0.20
goos: linux
BenchmarkSharedHotKey/store=postgres/mode=check-2 1 8000 admitted 901 bound 3000 checks/s 888 pct-of-bound 1000 pct-of-rate 5000 store-errors
BenchmarkSharedHotKey/store=redis/mode=check-2 1 899 admitted 900.5 bound 7000 checks/s 99.8 pct-of-bound 112.4 pct-of-rate 0 store-errors
BenchmarkSharedHotKey/store=postgres/mode=check-2 1 9000 admitted 901 bound 3100 checks/s 999 pct-of-bound 1125 pct-of-rate 6000 store-errors
BenchmarkSharedHotKey/store=redis/mode=check-2 1 890 admitted 900.5 bound 7100 checks/s 98.8 pct-of-bound 111.2 pct-of-rate 2 store-errors
# load average at end: 2.00 1.00 0.40
`
	if err := os.WriteFile(filepath.Join(dir, "2026-11-29-abc1234-sharedload.txt"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := sharedloadSection(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"8s per run", "PostgreSQL 18.1", "redis-server 7.2.4", "Medians of 2 runs",
		"| postgres | check | 3050 | 8500 | 901 | 943.5 % (999.0 %) | 1062.5 % (1000.0 %) | 5500 (6000) |\n",
		"| redis | check | 7050 | 894 | 900 | 99.3 % (99.8 %) | 111.8 % (111.2 %) | 1 (2) |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	if got, err := sharedloadSection(t.TempDir()); got != "" || err != nil {
		t.Errorf("without results: %q, %v; want nothing", got, err)
	}
	file := filepath.Join(dir, "2026-11-29-abc1234-sharedload.txt")
	if got, want := loadAverages(file), "1.00, 0.50, 0.20 → 2.00, 1.00, 0.40"; got != want {
		t.Errorf("loadAverages = %q, want %q", got, want)
	}
}
