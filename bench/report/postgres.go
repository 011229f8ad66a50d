package main

import (
	"fmt"
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
	section(&b, 2, postgresHeading, file)
	fmt.Fprintf(&b, "PostgreSQL %s, redis-server %s. Medians of %d runs.\n\n", r.config["postgres"], r.config["redis"], runs)
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
	section(&b, 2, auditHeading, file)
	fmt.Fprintf(&b, "Medians of %d runs.\n\n", runs)
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
		b.WriteString("\n| DeniedAt20k | CPU per denial | on / off | share of one core at 20,000 denials/s |\n|---|---|---|---|\n")
		fmt.Fprintf(&b, "| on − off | %.1f µs | %.2f× | %.0f %% |\n", (on-off)*1e6, on/off, 100*(on-off)*20000)
	}
	return b.String(), nil
}

// ratio prints a/b, or "—" without b.
func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// loadAverages is the machine's load average at the start and the end of
// a run, from the comment lines its script wrote ("# load average at start:
// 1.00 0.50 0.20"), or "" if it has none. The numbers follow the line's last
// colon.
func loadAverages(file string) string {
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
	return loads[0] + " → " + loads[1]
}

// usOrMs prints seconds as microseconds below 10 ms, else as milliseconds.
func usOrMs(sec float64) string {
	if sec < 0.01 {
		return us(sec)
	}
	return fmt.Sprintf("%.0f ms", sec*1e3)
}
