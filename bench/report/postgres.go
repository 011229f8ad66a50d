package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// postgresSection renders BenchmarkPostgres from the newest
// results/*-postgres.txt (bench/postgres.sh), or "" if there is none.
func postgresSection(dir string) (string, error) {
	file, r, err := newest(dir, "-postgres.txt")
	if file == "" || err != nil {
		return "", err
	}
	all := r.find("bench", "Postgres")
	if len(all) == 0 {
		return "", nil
	}
	keys, callers := r.distinct("keys", "bench", "Postgres"), r.distinct("callers", "bench", "Postgres")
	impls := r.impls("bench", "Postgres")
	get := func(unit, k, impl, c string) float64 {
		v, _ := r.medianOf(unit, "bench", "Postgres", "keys", k, "impl", impl, "callers", c)
		return v
	}
	runs := len(all[0].values["checks/s"])

	var b strings.Builder
	b.WriteString("\n## PostgreSQL: one limit shared through one local database\n\n")
	fmt.Fprintf(&b, "`bench/postgres.sh` runs `BenchmarkPostgres`: checks of a limit kept in one local\n")
	fmt.Fprintf(&b, "PostgreSQL %s (fsync off, UNLOGGED tables, a pool of 64 connections) from 1,\n", r.config["postgres"])
	b.WriteString("16 and 64 concurrent callers, on one hot key and on 1e4 keys in random order.\n")
	b.WriteString("`faucet` is `pgstore` (a function that reads without locking and writes by\n")
	b.WriteString("compare-and-swap, with the database's clock; at most one statement per key in\n")
	b.WriteString("flight, carrying the key's checks that arrived meanwhile); `faucet_single` is\n")
	b.WriteString("`pgstore` with coalescing off (`Config.DisableCoalescing`): one statement per\n")
	b.WriteString("check, the design before coalescing, for comparison;\n")
	b.WriteString("`for_update` is the common design as a peer on the same pool: per check one\n")
	b.WriteString("transaction, BEGIN; INSERT ... ON CONFLICT DO NOTHING; SELECT ... FOR UPDATE;\n")
	b.WriteString("refill in the application with its clock; on admission INSERT ... ON CONFLICT\n")
	b.WriteString("DO UPDATE; COMMIT (five round trips admitted, four denied, the row locked\n")
	b.WriteString("throughout; refill by whole milliseconds, an admission restarting the\n")
	b.WriteString("interval, so on a hot key it admits less than the limit, which only makes it\n")
	fmt.Fprintf(&b, "cheaper); `faucet_redis` is `redisstore` per check against a local redis-server\n")
	fmt.Fprintf(&b, "%s (as in the Redis section), for the choice between the two stores. The limits\n", r.config["redis"])
	b.WriteString("make both answers occur: the hot key gets 1000 tokens/s with a burst of 100, a\n")
	b.WriteString("flood mostly denied; each of the 1e4 keys 1 token/s with a burst of 1, so a\n")
	b.WriteString("key's first check in a run is admitted and most that follow within a second\n")
	b.WriteString("are not. The share admitted falls as an implementation gets faster. Tables\n")
	b.WriteString("(and Redis) are emptied before every run. Statements per check are what the\n")
	b.WriteString("server ran (scripts for Redis, where rueidis batches checks); CPU per check\n")
	b.WriteString("is the benchmark process's (client) and the server processes' (from /proc).\n")
	b.WriteString("The servers and the benchmark share the machine's cores.\n")
	fmt.Fprintf(&b, "Medians of %d runs in `bench/%s`%s.\n\n", runs, filepath.ToSlash(file), loadNote(file))

	b.WriteString("| keys | implementation | callers | checks/s | p50 | p99 | admitted | statements per check | client CPU per check | server CPU per check |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		for _, im := range impls {
			for _, c := range callers {
				cps := get("checks/s", k, im, c)
				if cps == 0 {
					continue
				}
				server := "—"
				if v, ok := r.medianOf("server-cpu-sec/op", "bench", "Postgres", "keys", k, "impl", im, "callers", c); ok {
					server = us(v)
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s | %s | %.1f %% | %.2f | %s | %s |\n", k, im, c, cps,
					usOrMs(get("p50-sec", k, im, c)), usOrMs(get("p99-sec", k, im, c)), 100*get("admit/op", k, im, c),
					get("stmts/op", k, im, c), us(get("client-cpu-sec/op", k, im, c)), server)
			}
		}
	}

	b.WriteString("\n| keys | callers | faucet checks/s | faucet_single checks/s | faucet ÷ faucet_single | for_update checks/s | faucet ÷ for_update | faucet_redis checks/s | faucet_redis ÷ faucet |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		for _, c := range callers {
			f, fs, fu, rd := get("checks/s", k, "faucet", c), get("checks/s", k, "faucet_single", c), get("checks/s", k, "for_update", c), get("checks/s", k, "faucet_redis", c)
			if f == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %s | %.0f | %s | %.0f | %s |\n", k, c, f, fs, ratio(f, fs), fu, ratio(f, fu), rd, ratio(rd, f))
		}
	}
	b.WriteString("\nReproduce: `cd bench && ./postgres.sh` (COUNT=10 runs of each configuration). It runs\n\n```\n")
	b.WriteString("go test -run '^$' -bench '^BenchmarkPostgres$' -benchtime 1s -count 10 -timeout 0 .\n```\n")
	return b.String(), nil
}

// auditSection renders pgaudit's benchmarks from the newest
// results/*-audit.txt, or "" if there is none.
func auditSection(dir string) (string, error) {
	file, r, err := newest(dir, "-audit.txt")
	if file == "" || err != nil {
		return "", err
	}
	denied := r.find("bench", "Denied")
	if len(denied) == 0 {
		return "", nil
	}
	get := func(unit, bench, audit string) float64 {
		v, _ := r.medianOf(unit, "bench", bench, "audit", audit)
		return v
	}
	runs := len(denied[0].values["sec/op"])

	var b strings.Builder
	b.WriteString("\n## Audit log: the cost of recording denials in PostgreSQL\n\n")
	b.WriteString("`pgstore/pgaudit`'s benchmarks send a request that `httplimit` denies through\n")
	b.WriteString("the middleware, with auditing off and with a `pgaudit.Writer` (which queues\n")
	b.WriteString("each denial and writes them in batches from a goroutine of its own) on a\n")
	b.WriteString("local PostgreSQL. `BenchmarkDenied` sends them as fast as one goroutine can,\n")
	b.WriteString("far beyond what one connection writes, so with auditing on most are dropped\n")
	b.WriteString("(the queue is full): its time is the queue's cost, full or not.\n")
	b.WriteString("`BenchmarkDeniedAt20k` paces 20,000 denials a second and counts the process's\n")
	b.WriteString("CPU time per denial until every one is written (the writer and the garbage\n")
	b.WriteString("collector included, PostgreSQL's own CPU not), so the difference between\n")
	b.WriteString("the rows is what auditing costs (its time per request is the pacing's).\n")
	fmt.Fprintf(&b, "Medians of %d runs in `bench/%s`%s.\n\n", runs, filepath.ToSlash(file), loadNote(file))

	b.WriteString("| benchmark | audit | time per request | B per request | allocs per request | dropped | CPU per denial | denials/s |\n|---|---|---|---|---|---|---|---|\n")
	for _, bench := range []string{"Denied", "DeniedAt20k"} {
		for _, a := range r.distinct("audit", "bench", bench) {
			ss := r.find("bench", bench, "audit", a)
			if len(ss) != 1 {
				continue
			}
			val := func(unit, format string, scale float64) string {
				if len(ss[0].values[unit]) == 0 {
					return "—"
				}
				return fmt.Sprintf(format, median(ss[0].values[unit])*scale)
			}
			perReq := "—"
			if bench == "Denied" {
				perReq = fmt.Sprintf("%.1f µs", get("sec/op", bench, a)*1e6)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", bench, a, perReq, val("B/op", "%.0f", 1), val("allocs/op", "%.0f", 1),
				val("drops/op", "%.1f %%", 100), val("cpu-sec/denial", "%.1f µs", 1e6), val("denials/s", "%.0f", 1))
		}
	}
	if off, on := get("cpu-sec/denial", "DeniedAt20k", "off"), get("cpu-sec/denial", "DeniedAt20k", "on"); off > 0 && on > 0 {
		fmt.Fprintf(&b, "\nAt 20,000 denials a second auditing adds %.1f µs of CPU per denial (%.2f× the\n", (on-off)*1e6, on/off)
		fmt.Fprintf(&b, "unaudited %.1f µs), %.0f %% of one core at that rate, and drops %.1f %% of them.\n",
			off*1e6, 100*(on-off)*20000, 100*get("drops/op", "DeniedAt20k", "on"))
	}
	b.WriteString("\nReproduce: `cd bench && ./audit.sh` (COUNT=10 runs of each; pgaudit's benchmarks start their own PostgreSQL). From the repository root it runs\n\n```\n")
	b.WriteString("go test -run '^$' -bench '^BenchmarkDenied$' -count 10 ./pgstore/pgaudit\n")
	b.WriteString("go test -run '^$' -bench '^BenchmarkDeniedAt20k$' -benchtime 40000x -count 10 ./pgstore/pgaudit\n```\n")
	return b.String(), nil
}

// ratio prints a/b, or "—" without b.
func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// loadNote says the machine's load average at the start and end of a run,
// from the comment lines its script wrote ("# ... load average: 1.0, ..."),
// or "" if it has none. The numbers follow the line's last colon.
func loadNote(file string) string {
	var loads []string
	for line := range strings.SplitSeq(readFile(file), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		if _, l, ok := strings.Cut(line, "load average"); ok {
			l = l[strings.LastIndexByte(l, ':')+1:]
			loads = append(loads, strings.Join(strings.FieldsFunc(l, func(r rune) bool { return r == ',' || r == ' ' }), ", "))
		}
	}
	if len(loads) != 2 {
		return ""
	}
	return fmt.Sprintf(" (load average over 1, 5 and 15 minutes: %s at the start, %s at the end)", loads[0], loads[1])
}

// usOrMs prints seconds as microseconds below 10 ms, else as milliseconds.
func usOrMs(sec float64) string {
	if sec < 0.01 {
		return us(sec)
	}
	return fmt.Sprintf("%.0f ms", sec*1e3)
}
