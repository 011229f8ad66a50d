package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The Redis targets: faucet's redisstore against go-redis/redis_rate at 64
// callers, and against the server's own ceiling (redis-benchmark running a
// no-op script by EVALSHA).
const (
	redisPeerTarget    = 2.0
	redisCeilingTarget = 0.5
	redisTargetCallers = "64"
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
	fmt.Fprintf(&b, "\n## Redis: one limit shared through one local server\n\n")
	fmt.Fprintf(&b, "`bench/redis.sh` starts one redis-server (%s, no persistence) on loopback and\n", r.config["redis"])
	b.WriteString("measures, against it, checks of a limit from 1, 16 and 64 concurrent callers:\n")
	b.WriteString("faucet's `redisstore` on its default client (rueidis, which pipelines every\n")
	b.WriteString("caller's commands onto one connection), `redisstore` on a go-redis v9 client\n")
	b.WriteString("(`faucet_goredis`), `go-redis/redis_rate` v10 (go-redis v9, a connection per\n")
	b.WriteString("caller), a no-op script (`return 1`) through rueidis (`noop_rueidis`: the\n")
	b.WriteString("ceiling of this client), and `redis-benchmark` sending EVALSHA of the same\n")
	b.WriteString("no-op script from as many connections as callers, one request outstanding on\n")
	b.WriteString("each (`noop_evalsha`: the ceiling of the server on this machine for callers\n")
	b.WriteString("that each wait for their reply, one script per check). A client that\n")
	b.WriteString("pipelines, as rueidis does, can pass that ceiling at 16 and 64 callers, since\n")
	b.WriteString("the server then reads many commands per system call (compare `noop_rueidis`);\n")
	b.WriteString("`redisstore` also sends the checks that arrive while four of its scripts are\n")
	b.WriteString("on their way together, up to 64 in one script, so that under load a script\n")
	b.WriteString("carries several checks (scripts per check < 1). Every Go\n")
	b.WriteString("implementation runs in the same process, against a server emptied before\n")
	b.WriteString("it; the checks spread over 1e4 keys in random order with a limit that never\n")
	b.WriteString("binds, so every check is admitted (admit column) and none is cheap by\n")
	b.WriteString("denying. Latency is per call as a caller sees it, waiting for the client\n")
	b.WriteString("included. Server time per check is what INFO commandstats counts for the\n")
	b.WriteString("script commands (the commands they call included); times checks/s it is the\n")
	b.WriteString("share of the server's one thread the checks kept busy. The server, the\n")
	b.WriteString("benchmark and redis-benchmark share the machine's\n")
	fmt.Fprintf(&b, "cores. Medians of %d runs in `bench/%s`.\n\n", runs, filepath.ToSlash(file))

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

	b.WriteString("\n| target | callers | faucet checks/s | reference checks/s | ratio | met |\n|---|---|---|---|---|---|\n")
	for _, t := range []struct {
		ref    string
		target float64
		label  string
	}{
		{"redis_rate", redisPeerTarget, "faucet ≥ %.0f× redis_rate"},
		{"noop_evalsha", redisCeilingTarget, "faucet ≥ %.0f %% of the no-op EVALSHA ceiling"},
	} {
		for _, c := range callers {
			f, ref := get("checks/s", "faucet", c), get("checks/s", t.ref, c)
			if f == 0 || ref == 0 {
				continue
			}
			x := t.target
			if t.target < 1 {
				x *= 100
			}
			met := "(not a target)"
			if c == redisTargetCallers || t.ref == "noop_evalsha" {
				met = "yes"
				if f/ref < t.target {
					met = "**no**"
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.2f | %s |\n", fmt.Sprintf(t.label, x), c, f, ref, f/ref, met)
		}
	}

	b.WriteString("\nReproduce: `cd bench && ./redis.sh` (COUNT=10 runs of each configuration). It runs\n\n```\n")
	b.WriteString("FAUCET_REDIS_ADDR=127.0.0.1:PORT go test -run '^$' -bench '^BenchmarkRedis$' -count 10 -timeout 0 .\n")
	cmds := map[string]bool{}
	for line := range strings.SplitSeq(readFile(strings.TrimSuffix(file, ".txt")+"-raw.txt"), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok && !cmds[cmd] {
			cmds[cmd] = true
			b.WriteString(cmd + "\n")
		}
	}
	b.WriteString("```\n\nthe EVALSHA argument being the SHA1 of `return 1`; redis-benchmark's own output\n")
	fmt.Fprintf(&b, "is in `bench/%s`.\n", filepath.ToSlash(strings.TrimSuffix(file, ".txt")+"-raw.txt"))
	return b.String(), nil
}

// us prints seconds as microseconds. (benchfmt reads the benchmarks' p50-ns
// and p99-ns as p50-sec and p99-sec, in seconds.)
func us(sec float64) string { return fmt.Sprintf("%.0f µs", sec*1e6) }
