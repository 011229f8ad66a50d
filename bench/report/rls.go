package main

import (
	"fmt"
	"path/filepath"
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
	b.WriteString("\n## Envoy rate-limit service\n\n")
	b.WriteString("`BenchmarkRLS` (run by `bench/redis.sh`, against the same server) calls\n")
	b.WriteString("`ShouldRateLimit` through the generated Envoy client over loopback gRPC, one\n")
	b.WriteString("descriptor per request over 1e4 client addresses, with 1 and 64 calls in\n")
	b.WriteString("flight on one connection, as Envoy makes them. `faucet` is `faucet serve\n")
	b.WriteString("--rls`'s service with buckets in memory, `faucet_redis` the same with\n")
	b.WriteString("buckets in Redis per check, and `envoy_ratelimit` the reference server\n")
	b.WriteString("(envoyproxy/ratelimit v1.4.1-0.20260122083618-3fb702589d36, built from its\n")
	b.WriteString("module, its own process, Redis backend, default settings). The limit never\n")
	b.WriteString("binds. Client, servers and Redis share the machine's cores. Medians of\n")
	fmt.Fprintf(&b, "%d runs in `bench/%s`.\n\n", runs, filepath.ToSlash(file))
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
	b.WriteString("\nReproduce: `cd bench && ./redis.sh`, which runs\n\n```\n")
	b.WriteString("FAUCET_REDIS_ADDR=127.0.0.1:PORT go test -run '^$' -bench '^BenchmarkRLS$' -count 10 -timeout 0 .\n```\n")
	return b.String(), nil
}
