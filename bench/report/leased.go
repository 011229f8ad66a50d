package main

import (
	"fmt"
	"strings"
)

// leasedBench is one store's leased benchmark and the section it fills.
type leasedBench struct {
	bench, suffix, heading string
	calls, callsName       string // the per-check unit of store calls, and its name
}

// leasedSection renders BenchmarkLeased from the newest results/*-redis.txt
// (bench/redis.sh runs it against the same server), or "" if it has none.
func leasedSection(dir string) (string, error) {
	return leasedBenchSection(dir, leasedBench{
		bench: "Leased", suffix: "-redis.txt", heading: leasedHeading,
		calls: "scripts/op", callsName: "Redis scripts",
	})
}

// leasedPostgresSection renders BenchmarkLeasedPostgres from the newest
// results/*-postgres.txt (bench/postgres.sh runs it), or "" if it has none.
func leasedPostgresSection(dir string) (string, error) {
	return leasedBenchSection(dir, leasedBench{
		bench: "LeasedPostgres", suffix: "-postgres.txt", heading: pgLeasedHeading,
		calls: "stmts/op", callsName: "PostgreSQL statements",
	})
}

// leasedBenchSection renders lb's benchmark from the newest results file
// of its suffix, or "" if it has none.
func leasedBenchSection(dir string, lb leasedBench) (string, error) {
	file, r, err := newest(dir, lb.suffix)
	if file == "" || err != nil {
		return "", err
	}
	all := r.find("bench", lb.bench)
	if len(all) == 0 {
		return "", nil
	}
	keys, callers := r.distinct("keys", "bench", lb.bench), r.distinct("callers", "bench", lb.bench)
	impls := r.impls("bench", lb.bench)
	get := func(unit, k, impl, c string) float64 {
		v, _ := r.medianOf(unit, "bench", lb.bench, "keys", k, "impl", impl, "callers", c)
		return v
	}
	runs := len(all[0].values["checks/s"])

	var b strings.Builder
	section(&b, 2, lb.heading, file)
	fmt.Fprintf(&b, "Medians of %d runs.\n\n", runs)

	callsCol := strings.ToLower(strings.Fields(lb.callsName)[1])
	fmt.Fprintf(&b, "| keys | implementation | callers | checks/s | p50 | p99 | %s per check | decided locally |\n|---|---|---|---|---|---|---|---|\n", callsCol)
	for _, k := range keys {
		for _, im := range impls {
			for _, c := range callers {
				cps := get("checks/s", k, im, c)
				if cps == 0 {
					continue
				}
				sc := get(lb.calls, k, im, c)
				fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s | %s | %s | %.3f %% |\n", k, im, c, cps,
					nsOrUs(get("p50-sec", k, im, c)), nsOrUs(get("p99-sec", k, im, c)), fmt.Sprintf("%.6f", sc), 100*(1-sc))
			}
		}
	}

	fmt.Fprintf(&b, "\n| keys | callers | %s, %% of checks | engine checks/s / faucet_leased checks/s | faucet_leased p99 / engine p99 |\n|---|---|---|---|---|\n", lb.callsName)
	for _, k := range keys {
		for _, c := range callers {
			cps, sc := get("checks/s", k, "faucet_leased", c), get(lb.calls, k, "faucet_leased", c)
			if cps == 0 {
				continue
			}
			cost, tail := "—", "—"
			if eng := get("checks/s", k, "engine", c); eng > 0 {
				cost = fmt.Sprintf("%.2f×", eng/cps)
			}
			if ep99 := get("p99-sec", k, "engine", c); ep99 > 0 {
				tail = fmt.Sprintf("%.2f×", get("p99-sec", k, "faucet_leased", c)/ep99)
			}
			fmt.Fprintf(&b, "| %s | %s | %.4f %% | %s | %s |\n", k, c, 100*sc, cost, tail)
		}
	}
	return b.String(), nil
}

// nsOrUs prints seconds as nanoseconds below a microsecond, else as
// microseconds.
func nsOrUs(sec float64) string {
	if sec < 1e-6 {
		return fmt.Sprintf("%.0f ns", sec*1e9)
	}
	return us(sec)
}
