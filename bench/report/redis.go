package main

import (
	"fmt"
	"strings"
)

// redisSection renders the Redis benchmarks from the newest
// results/*-redis.txt (bench/redis.sh), or "" if there is none. Like the
// HTTP load test it has its own file: it needs a redis-server, and its
// ceiling rows come from redis-benchmark, not go test.
func redisSection(dir string) (string, error) {
	file, r, err := newest(dir, "-redis.txt")
	if file == "" || err != nil {
		return "", err
	}
	impls := r.impls("bench", "Redis")
	callers := r.distinct("callers", "bench", "Redis")
	get := func(unit, impl, c string) float64 {
		v, _ := r.medianOf(unit, "bench", "Redis", "impl", impl, "callers", c)
		return v
	}
	runs := 0
	if ss := r.find("bench", "Redis", "impl", "faucet"); len(ss) > 0 {
		runs = len(ss[0].values["checks/s"])
	}

	var b strings.Builder
	section(&b, 2, redisHeading, file, rawFile(file))
	fmt.Fprintf(&b, "redis-server %s. Medians of %d runs.\n\n", r.config["redis"], runs)
	b.WriteString("| implementation | callers | checks/s | p50 | p99 | admitted | scripts per check | server time per check | server busy |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, im := range impls {
		for _, c := range callers {
			cps := get("checks/s", im, c)
			if cps == 0 {
				continue
			}
			server, busy, scripts := "—", "—", "—"
			if st := get("server-sec/op", im, c); st > 0 {
				server, busy = fmt.Sprintf("%.1f µs", st*1e6), fmt.Sprintf("%.0f %%", 100*st*cps)
			}
			if sc := get("scripts/op", im, c); sc > 0 {
				scripts = fmt.Sprintf("%.3f", sc)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %.1f %% | %s | %s | %s |\n", im, c, cps,
				us(get("p50-sec", im, c)), us(get("p99-sec", im, c)), 100*get("admit/op", im, c), scripts, server, busy)
		}
	}

	b.WriteString("\n| callers | faucet checks/s | redis_rate checks/s | faucet / redis_rate | noop_evalsha checks/s | faucet / noop_evalsha |\n|---|---|---|---|---|---|\n")
	for _, c := range callers {
		f, rr, ev := get("checks/s", "faucet", c), get("checks/s", "redis_rate", c), get("checks/s", "noop_evalsha", c)
		if f == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %s | %.0f | %s |\n", c, f, rr, ratio(f, rr), ev, ratio(f, ev))
	}
	return b.String(), nil
}

// rawFile is the redis-benchmark output that bench/redis.sh writes beside
// its results file.
func rawFile(file string) string { return strings.TrimSuffix(file, ".txt") + "-raw.txt" }

// us prints seconds as microseconds. (benchfmt reads the benchmarks' p50-ns
// and p99-ns as p50-sec and p99-sec, in seconds.)
func us(sec float64) string { return fmt.Sprintf("%.0f µs", sec*1e6) }
