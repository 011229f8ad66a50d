package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The leased-mode targets (issue: global limits at local speed): at a steady
// load, at least 95 % of checks decided in memory, Redis scripts at most 1 %
// of checks, and the per-check cost within 2× the engine's, with a p99 under
// a microsecond.
const (
	leasedLocalTarget  = 0.95
	leasedScriptTarget = 0.01
	leasedEngineFactor = 2.0
	leasedP99Target    = 1e-6
)

// leasedSection renders BenchmarkLeased from the newest results/*-redis.txt
// (bench/redis.sh runs it against the same server), or "" if it has none.
func leasedSection(dir string) (string, error) {
	file, r, err := newest(dir, "-redis.txt")
	if file == "" || err != nil {
		return "", err
	}
	all := r.find("bench", "Leased")
	if len(all) == 0 {
		return "", nil
	}
	keys, callers := r.distinct("keys", "bench", "Leased"), r.distinct("callers", "bench", "Leased")
	impls := r.impls("bench", "Leased")
	get := func(unit, k, impl, c string) float64 {
		v, _ := r.medianOf(unit, "bench", "Leased", "keys", k, "impl", impl, "callers", c)
		return v
	}
	runs := len(all[0].values["checks/s"])

	var b strings.Builder
	b.WriteString("\n## Leases: a shared limit at local speed\n\n")
	b.WriteString("`BenchmarkLeased` (run by `bench/redis.sh`, against the same server) checks\n")
	b.WriteString("a limit shared through Redis where it is hot from every caller: one global\n")
	b.WriteString("limit (keys=1) and a hundred tenants (keys=100), from 1, 16 and 64 callers.\n")
	b.WriteString("`faucet_leased` is `redisstore.NewLeased` with its default options (checks\n")
	b.WriteString("decided in memory from leases of the shared buckets, the next lease fetched\n")
	b.WriteString("ahead), `faucet` is `redisstore` per check, `redis_rate` its peer, and\n")
	b.WriteString("`engine` the in-memory engine with no Redis at all, the floor. The limit\n")
	b.WriteString("(1e9/s, burst 1e9) never binds, so every check is admitted. Scripts per\n")
	b.WriteString("check is what reached Redis; one minus it is the share decided locally.\n")
	fmt.Fprintf(&b, "Latency includes the harness's two clock reads per call. Medians of %d runs\n", runs)
	fmt.Fprintf(&b, "in `bench/%s`.\n\n", filepath.ToSlash(file))

	b.WriteString("| keys | implementation | callers | checks/s | p50 | p99 | scripts per check | decided locally |\n|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		for _, im := range impls {
			for _, c := range callers {
				cps := get("checks/s", k, im, c)
				if cps == 0 {
					continue
				}
				sc := get("scripts/op", k, im, c)
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
			cps, sc := get("checks/s", k, "faucet_leased", c), get("scripts/op", k, "faucet_leased", c)
			if cps == 0 {
				continue
			}
			p99, eng := get("p99-sec", k, "faucet_leased", c), get("checks/s", k, "engine", c)
			fmt.Fprintf(&b, "| ≥ %.0f %% decided locally | %s | %s | %.3f %% | | %s |\n", 100*leasedLocalTarget, k, c, 100*(1-sc), met(1-sc >= leasedLocalTarget))
			fmt.Fprintf(&b, "| Redis scripts ≤ %.0f %% of checks | %s | %s | %.4f %% | | %s |\n", 100*leasedScriptTarget, k, c, 100*sc, met(sc <= leasedScriptTarget))
			if eng > 0 {
				fmt.Fprintf(&b, "| cost ≤ %.0f× the engine's | %s | %s | %.0f checks/s | engine %.0f checks/s (%.2f×) | %s |\n",
					leasedEngineFactor, k, c, cps, eng, eng/cps, met(eng/cps <= leasedEngineFactor))
			}
			fmt.Fprintf(&b, "| p99 < 1 µs | %s | %s | %s | | %s |\n", k, c, nsOrUs(p99), met(p99 < leasedP99Target))
		}
	}
	b.WriteString("\nReproduce: `cd bench && ./redis.sh`, which runs\n\n```\n")
	b.WriteString("FAUCET_REDIS_ADDR=127.0.0.1:PORT go test -run '^$' -bench '^BenchmarkLeased$' -count 10 -timeout 0 .\n```\n")
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
