package main

import (
	"fmt"
	"strings"
)

// rlsSection renders BenchmarkRLS from the newest results/*-redis.txt
// (bench/redis.sh runs it against the same server), or "" if it has none.
func rlsSection(dir string) (string, error) {
	file, r, err := newest(dir, "-redis.txt")
	if file == "" || err != nil {
		return "", err
	}
	all := r.find("bench", "RLS")
	if len(all) == 0 {
		return "", nil
	}
	streams := r.distinct("streams", "bench", "RLS")
	impls := r.impls("bench", "RLS")
	get := func(unit, impl, c string) float64 {
		v, _ := r.medianOf(unit, "bench", "RLS", "impl", impl, "streams", c)
		return v
	}
	runs := len(all[0].values["checks/s"])

	var b strings.Builder
	section(&b, 2, rlsHeading, file)
	fmt.Fprintf(&b, "envoyproxy/ratelimit %s. Medians of %d runs.\n\n", moduleVersion("github.com/envoyproxy/ratelimit"), runs)
	b.WriteString("| implementation | streams | requests/s | p50 | p99 | admitted |\n|---|---|---|---|---|---|\n")
	for _, im := range impls {
		for _, c := range streams {
			rps := get("checks/s", im, c)
			if rps == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %.1f %% |\n", im, c, rps,
				nsOrUs(get("p50-sec", im, c)), nsOrUs(get("p99-sec", im, c)), 100*get("admit/op", im, c))
		}
	}
	b.WriteString("\n| streams | faucet / envoy_ratelimit, requests/s | faucet_redis / envoy_ratelimit | p99, faucet / envoy_ratelimit |\n|---|---|---|---|\n")
	for _, c := range streams {
		ref := get("checks/s", "envoy_ratelimit", c)
		if ref == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.2f× | %.2f× | %.2f× |\n", c, get("checks/s", "faucet", c)/ref,
			get("checks/s", "faucet_redis", c)/ref, get("p99-sec", "faucet", c)/get("p99-sec", "envoy_ratelimit", c))
	}
	return b.String(), nil
}
