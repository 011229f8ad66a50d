package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The leased-mode targets (issue: global limits at local speed): at a steady
// load, at least 95 % of checks decided in memory, store calls at most 1 %
// of checks, and the per-check cost and p99 within 2× the engine's, with a
// p99 under a microsecond.
const (
	leasedLocalTarget  = 0.95
	leasedScriptTarget = 0.01
	leasedEngineFactor = 2.0
	leasedP99Target    = 1e-6
)

// leasedBench is one store's leased benchmark and how the section about it
// reads.
type leasedBench struct {
	bench, suffix, heading string
	intro                  []string // the section's opening lines
	calls, callsName       string   // the per-check unit of store calls, and its name
	reproduce              []string // the command lines that reproduce it
}

// leasedSection renders BenchmarkLeased from the newest results/*-redis.txt
// (bench/redis.sh runs it against the same server), or "" if it has none.
func leasedSection(dir string) (string, error) {
	return leasedBenchSection(dir, leasedBench{
		bench: "Leased", suffix: "-redis.txt", heading: "Leases: a shared limit at local speed",
		intro: []string{
			"`BenchmarkLeased` (run by `bench/redis.sh`, against the same server) checks",
			"a limit shared through Redis where it is hot from every caller: one global",
			"limit (keys=1) and a hundred tenants (keys=100), from 1, 16 and 64 callers.",
			"`faucet_leased` is `redisstore.NewLeased` with its default options (checks",
			"decided in memory from leases of the shared buckets, the next lease fetched",
			"ahead), `faucet` is `redisstore` per check, `redis_rate` its peer, and",
			"`engine` the in-memory engine with no Redis at all, the floor. The limit",
			"(1e9/s, burst 1e9) never binds, so every check is admitted. Scripts per",
			"check is what reached Redis; one minus it is the share decided locally.",
		},
		calls: "scripts/op", callsName: "Redis scripts",
		reproduce: []string{"`cd bench && ./redis.sh`", "FAUCET_REDIS_ADDR=127.0.0.1:PORT go test -run '^$' -bench '^BenchmarkLeased$' -count 10 -timeout 0 ."},
	})
}

// leasedPostgresSection renders BenchmarkLeasedPostgres from the newest
// results/*-postgres.txt (bench/postgres.sh runs it), or "" if it has none.
func leasedPostgresSection(dir string) (string, error) {
	return leasedBenchSection(dir, leasedBench{
		bench: "LeasedPostgres", suffix: "-postgres.txt", heading: "Leases on PostgreSQL",
		intro: []string{
			"`BenchmarkLeasedPostgres` (run by `bench/postgres.sh`) is `BenchmarkLeased`",
			"on PostgreSQL: `faucet_leased` is `pgstore.NewLeased` with its default",
			"options, `faucet` is `pgstore` per check, and `engine` the in-memory engine,",
			"the floor. Statements per check is what reached the database; one minus it",
			"is the share decided locally.",
		},
		calls: "stmts/op", callsName: "PostgreSQL statements",
		reproduce: []string{"`cd bench && ./postgres.sh`", "go test -run '^$' -bench '^BenchmarkLeasedPostgres$' -count 10 -timeout 0 ."},
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
	fmt.Fprintf(&b, "\n## %s\n\n", lb.heading)
	for _, line := range lb.intro {
		b.WriteString(line + "\n")
	}
	fmt.Fprintf(&b, "Latency includes the harness's two clock reads per call. Medians of %d runs\n", runs)
	fmt.Fprintf(&b, "in `bench/%s`.\n\n", filepath.ToSlash(file))

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

	b.WriteString("\n| target | keys | callers | faucet_leased | reference | met |\n|---|---|---|---|---|---|\n")
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	for _, k := range keys {
		for _, c := range callers {
			cps, sc := get("checks/s", k, "faucet_leased", c), get(lb.calls, k, "faucet_leased", c)
			if cps == 0 {
				continue
			}
			p99, eng := get("p99-sec", k, "faucet_leased", c), get("checks/s", k, "engine", c)
			fmt.Fprintf(&b, "| ≥ %.0f %% decided locally | %s | %s | %.3f %% | | %s |\n", 100*leasedLocalTarget, k, c, 100*(1-sc), met(1-sc >= leasedLocalTarget))
			fmt.Fprintf(&b, "| %s ≤ %.0f %% of checks | %s | %s | %.4f %% | | %s |\n", lb.callsName, 100*leasedScriptTarget, k, c, 100*sc, met(sc <= leasedScriptTarget))
			if eng > 0 {
				fmt.Fprintf(&b, "| cost ≤ %.0f× the engine's | %s | %s | %.0f checks/s | engine %.0f checks/s (%.2f×) | %s |\n",
					leasedEngineFactor, k, c, cps, eng, eng/cps, met(eng/cps <= leasedEngineFactor))
			}
			if ep99 := get("p99-sec", k, "engine", c); ep99 > 0 {
				fmt.Fprintf(&b, "| p99 ≤ %.0f× the engine's | %s | %s | %s | engine %s (%.2f×) | %s |\n",
					leasedEngineFactor, k, c, nsOrUs(p99), nsOrUs(ep99), p99/ep99, met(p99 <= leasedEngineFactor*ep99))
			}
			fmt.Fprintf(&b, "| p99 < 1 µs | %s | %s | %s | | %s |\n", k, c, nsOrUs(p99), met(p99 < leasedP99Target))
		}
	}
	fmt.Fprintf(&b, "\nReproduce: %s, which runs\n\n```\n%s\n```\n", lb.reproduce[0], lb.reproduce[1])
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
