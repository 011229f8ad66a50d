package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// httpSection renders the load test of faucet serve from the newest
// results/*-http.txt (bench/http.sh), serve's profiles
// (bench/httpprofile.sh) and httplimit's BenchmarkCheck from the -check.txt
// beside it, or "" if there is no -http.txt. It has its own results file
// because it runs processes, not go test.
func httpSection(dir string) (string, error) {
	file, r, err := newest(dir, "-http.txt")
	if file == "" || err != nil {
		return "", err
	}
	loads := r.distinct("load", "bench", "HTTP")
	var b strings.Builder
	section(&b, 2, httpHeading, file)
	b.WriteString("Medians of the rounds.\n\n")
	fmt.Fprintf(&b, "| load | target | req/s | p50 | p99 | p99.9 | CPU per request | non-200 |\n|---|---|---|---|---|---|---|---|\n")
	for _, l := range loads {
		for _, t := range []string{"bare", "proxy", "proxy2", "proxy-linked", "faucet", "faucet-deny", "faucet-fasthttp", "faucet-fasthttp-deny", "go-429", "fasthttp-429", "fasthttp-proxy", "nginx", "nginx-limit", "nginx-deny"} {
			get := func(unit string) float64 { v, _ := r.medianOf(unit, "bench", "HTTP", "target", t, "load", l); return v }
			if get("req/s") == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %.1f µs | %.2f %% |\n", l, t, get("req/s"),
				ms(get("p50-sec")), ms(get("p99-sec")), ms(get("p99.9-sec")), get("server-cpu-sec/op")*1e6, 100*get("non200/op"))
		}
	}
	b.WriteString("\n| load | faucet p99 / proxy p99 | p (Mann-Whitney, p99) | faucet req/s / proxy req/s (median of the rounds) | faucet CPU − proxy CPU per request (median of the rounds) | noise: proxy2 req/s / proxy req/s, CPU − proxy CPU (same) | proxy-linked req/s / proxy req/s, CPU − proxy CPU (same) | faucet req/s / proxy-linked req/s, CPU − proxy-linked CPU (same) |\n|---|---|---|---|---|---|---|---|\n")
	for _, l := range loads {
		fp, _ := r.medianOf("p99-sec", "bench", "HTTP", "target", "faucet", "load", l)
		pp, _ := r.medianOf("p99-sec", "bench", "HTTP", "target", "proxy", "load", l)
		// CPU and req/s are compared round by round: the targets of a round
		// were loaded in turn over the same seconds, and what moves from
		// one round to the next moves all of them.
		cpu := func(t, base string) float64 {
			return paired(r, "server-cpu-sec/op", l, t, base, func(a, b float64) float64 { return a - b })
		}
		rate := func(t, base string) float64 {
			return paired(r, "req/s", l, t, base, func(a, b float64) float64 { return a / b })
		}
		// against is target t's req/s ratio and CPU difference to base.
		against := func(t, base string) string {
			return fmt.Sprintf("%.3f, %+.1f µs", rate(t, base), cpu(t, base)*1e6)
		}
		pr, _ := r.medianOf("req/s", "bench", "HTTP", "target", "proxy", "load", l)
		noise, weight, own := "—", "—", "—"
		if _, ok := r.medianOf("req/s", "bench", "HTTP", "target", "proxy2", "load", l); ok && pr != 0 {
			noise = against("proxy2", "proxy")
		}
		if _, ok := r.medianOf("req/s", "bench", "HTTP", "target", "proxy-linked", "load", l); ok && pr != 0 {
			weight, own = against("proxy-linked", "proxy"), against("faucet", "proxy-linked")
		}
		if pp == 0 || pr == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.3f | %.2f | %.3f | %+.1f µs | %s | %s | %s |\n", l, fp/pp,
			pValue(r, "p99-sec", l), rate("faucet", "proxy"), cpu("faucet", "proxy")*1e6, noise, weight, own)
	}
	b.WriteString(nginxTable(r, loads))
	b.WriteString(floorTable(r, loads))
	b.WriteString(engineTable(r, loads))
	prof, err := profileSection(dir)
	if err != nil {
		return "", err
	}
	b.WriteString(prof)
	prof, err = fastProfileSection(dir)
	if err != nil {
		return "", err
	}
	b.WriteString(prof)
	check, err := checkSection(dir)
	if err != nil {
		return "", err
	}
	b.WriteString(check)
	return b.String(), nil
}

// nginxTable compares faucet serve with NGINX's limit_req, round by round:
// a rule that never binds (faucet against nginx-limit) and one that denies
// almost everything (faucet-deny against nginx-deny), and the same on the
// fasthttp engine (faucet-fasthttp, faucet-fasthttp-deny) where it ran; ""
// without NGINX rows.
func nginxTable(r *results, loads []string) string {
	var b strings.Builder
	for _, l := range loads {
		if _, ok := r.medianOf("req/s", "bench", "HTTP", "target", "nginx-limit", "load", l); !ok {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nAgainst NGINX's `limit_req` (medians of the rounds' ratios; above 1 faucet serve does better):\n\n")
			b.WriteString("| load | rule | req/s, faucet / NGINX | CPU per request, NGINX / faucet | p99, NGINX / faucet | NGINX's limit_req against its plain proxy: req/s, CPU |\n|---|---|---|---|---|---|\n")
		}
		for _, c := range []struct{ rule, faucet, nginx string }{
			{"never binds", "faucet", "nginx-limit"}, {"never binds (fasthttp)", "faucet-fasthttp", "nginx-limit"},
			{"denies", "faucet-deny", "nginx-deny"}, {"denies (fasthttp)", "faucet-fasthttp-deny", "nginx-deny"},
		} {
			if strings.HasPrefix(c.faucet, "faucet-fasthttp") && !ran(r, c.faucet, l) {
				continue
			}
			rate := paired(r, "req/s", l, c.faucet, c.nginx, func(a, b float64) float64 { return a / b })
			cpu := paired(r, "server-cpu-sec/op", l, c.nginx, c.faucet, func(a, b float64) float64 { return a / b })
			p99 := paired(r, "p99-sec", l, c.nginx, c.faucet, func(a, b float64) float64 { return a / b })
			own := "—"
			if c.faucet == "faucet" {
				own = fmt.Sprintf("%.3f, %.3f", paired(r, "req/s", l, "nginx-limit", "nginx", func(a, b float64) float64 { return a / b }),
					paired(r, "server-cpu-sec/op", l, "nginx-limit", "nginx", func(a, b float64) float64 { return a / b }))
			}
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %.3f | %s |\n", l, c.rule, rate, cpu, p99, own)
		}
	}
	return b.String()
}

// floorTable compares faucet serve's denial (faucet-deny) with its floor,
// a bare Go server that writes the same 429 with no limiter (go-429), round
// by round, and, where serve ran on fasthttp, its denial there
// (faucet-fasthttp-deny) with fasthttp's bare 429 (fasthttp-429); "" without
// go-429 rows.
func floorTable(r *results, loads []string) string {
	fast := ranAnywhere(r, loads, "faucet-fasthttp-deny", "fasthttp-429")
	heading := "\nThe floor: a bare Go server answering 429 (`go-429`: faucet-deny's status, header fields and body, written\n" +
		"as constants, no limiter; medians of the rounds' ratios and differences, 1 and 0 where faucet serve is at the floor"
	if fast {
		heading += ";\non fasthttp, faucet-fasthttp-deny against `fasthttp-429`, the same 429 on fasthttp's server"
	}
	heading += "):\n\n| load | req/s, faucet-deny / go-429 | CPU per request, go-429 / faucet-deny | CPU per request, faucet-deny − go-429 | NGINX's denial against the floor: req/s, nginx-deny / go-429; CPU, go-429 / nginx-deny |"
	if fast {
		heading += " on fasthttp: req/s, faucet-fasthttp-deny / fasthttp-429; CPU, fasthttp-429 / faucet-fasthttp-deny; CPU, faucet-fasthttp-deny − fasthttp-429 |\n|---|---|---|---|---|---|\n"
	} else {
		heading += "\n|---|---|---|---|---|\n"
	}
	return tableWhereRan(r, loads, "go-429", heading, func(b *strings.Builder, l string) {
		div := func(a, b float64) float64 { return a / b }
		sub := func(a, b float64) float64 { return a - b }
		nginx := "—"
		if ran(r, "nginx-deny", l) {
			nginx = fmt.Sprintf("%.3f, %.3f", paired(r, "req/s", l, "nginx-deny", "go-429", div), paired(r, "server-cpu-sec/op", l, "go-429", "nginx-deny", div))
		}
		fmt.Fprintf(b, "| %s | %.3f | %.3f | %+.1f µs | %s |", l, paired(r, "req/s", l, "faucet-deny", "go-429", div),
			paired(r, "server-cpu-sec/op", l, "go-429", "faucet-deny", div),
			paired(r, "server-cpu-sec/op", l, "faucet-deny", "go-429", sub)*1e6, nginx)
		switch {
		case !fast:
		case ran(r, "faucet-fasthttp-deny", l) && ran(r, "fasthttp-429", l):
			fmt.Fprintf(b, " %.3f, %.3f, %+.1f µs |", paired(r, "req/s", l, "faucet-fasthttp-deny", "fasthttp-429", div),
				paired(r, "server-cpu-sec/op", l, "fasthttp-429", "faucet-fasthttp-deny", div),
				paired(r, "server-cpu-sec/op", l, "faucet-fasthttp-deny", "fasthttp-429", sub)*1e6)
		default:
			b.WriteString(" — |")
		}
		b.WriteString("\n")
	})
}

// engineTable sets faucet serve's CPU per request beside what the HTTP
// engines cost with no limiter: net/http's bare 429 (go-429), fasthttp's
// bare 429 and minimal proxy, and NGINX, with serve on fasthttp
// (faucet-fasthttp-deny, faucet-fasthttp) where it ran; "" without fasthttp
// rows.
func engineTable(r *results, loads []string) string {
	denied := []string{"faucet-deny", "go-429", "fasthttp-429", "nginx-deny"}
	admitted := []string{"faucet", "fasthttp-proxy", "nginx"}
	heading := "\nWhat the HTTP engine costs: CPU per request (median of the rounds) of faucet serve, of servers that do\n" +
		"the same job without a limiter on net/http (`go-429`) and on fasthttp (`fasthttp-429`, and `fasthttp-proxy`, a\n" +
		"proxy that only adds X-Forwarded-For), and of NGINX:\n\n"
	if ranAnywhere(r, loads, "faucet-fasthttp-deny") || ranAnywhere(r, loads, "faucet-fasthttp") {
		denied = slices.Insert(denied, 1, "faucet-fasthttp-deny")
		admitted = slices.Insert(admitted, 1, "faucet-fasthttp")
		heading = "\nWhat the HTTP engine costs: CPU per request (median of the rounds) of faucet serve on net/http and on\n" +
			"fasthttp (`faucet-fasthttp-deny` and `faucet-fasthttp`, with `--http-engine fasthttp`), of servers that do\n" +
			"the same job without a limiter on net/http (`go-429`) and on fasthttp (`fasthttp-429`, and `fasthttp-proxy`, a\n" +
			"proxy that only adds X-Forwarded-For), and of NGINX:\n\n"
	}
	cols := append(slices.Clone(denied), admitted...)
	heading += "| load | denied: " + strings.Join(denied, " | ") + " | admitted: " + strings.Join(admitted, " | ") + " |\n|---|" +
		strings.Repeat("---|", len(cols)) + "\n"
	return tableWhereRan(r, loads, "fasthttp-429", heading, func(b *strings.Builder, l string) {
		fmt.Fprintf(b, "| %s", l)
		for _, t := range cols {
			if v, ok := r.medianOf("server-cpu-sec/op", "bench", "HTTP", "target", t, "load", l); ok {
				fmt.Fprintf(b, " | %.1f µs", v*1e6)
			} else {
				b.WriteString(" | —")
			}
		}
		b.WriteString(" |\n")
	})
}

// tableWhereRan is heading and, for each load at which target ran, the
// row that row writes; "" if target ran at none.
func tableWhereRan(r *results, loads []string, target, heading string, row func(b *strings.Builder, l string)) string {
	var b strings.Builder
	for _, l := range loads {
		if !ran(r, target, l) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString(heading)
		}
		row(&b, l)
	}
	return b.String()
}

// ranAnywhere reports whether each of targets was loaded at one of loads
// at least.
func ranAnywhere(r *results, loads []string, targets ...string) bool {
	for _, t := range targets {
		if !slices.ContainsFunc(loads, func(l string) bool { return ran(r, t, l) }) {
			return false
		}
	}
	return true
}

// ran reports whether target was loaded at load l.
func ran(r *results, target, l string) bool {
	_, ok := r.medianOf("req/s", "bench", "HTTP", "target", target, "load", l)
	return ok
}

// checkHeading is the heading of httplimit's BenchmarkCheck.
const checkHeading = "The limiter alone: httplimit's BenchmarkCheck"

// checkSection renders the limiter's own cost per request, without a
// network (httplimit's BenchmarkCheck, and beside it BenchmarkCheckCold and
// BenchmarkWriteProblem, run by http.sh), from the newest
// results/*-check.txt, or "" if there is none.
func checkSection(dir string) (string, error) {
	file, _, err := newest(dir, "-check.txt")
	if file == "" || err != nil {
		return "", err
	}
	table, err := benchstat(file)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	section(&b, 3, checkHeading, file)
	codeBlock(&b, table)
	return b.String(), nil
}

// paired is the median over the rounds of op(a, b), a target a's value of
// unit and b's in the same round, for load: the rounds are in file order.
// Without as many values of each, it is op of their medians.
func paired(r *results, unit, load, a, b string, op func(a, b float64) float64) float64 {
	sa := r.find("bench", "HTTP", "target", a, "load", load)
	sb := r.find("bench", "HTTP", "target", b, "load", load)
	if len(sa) != 1 || len(sb) != 1 || len(sa[0].values[unit]) == 0 || len(sb[0].values[unit]) == 0 {
		return 0
	}
	x, y := sa[0].values[unit], sb[0].values[unit]
	if len(x) != len(y) {
		return op(median(x), median(y))
	}
	d := make([]float64, len(x))
	for i := range x {
		d[i] = op(x[i], y[i])
	}
	return median(d)
}

func ms(sec float64) string { return fmt.Sprintf("%.2f ms", sec*1e3) }

// pValue is the two-sided Mann-Whitney U test of faucet against proxy on
// one unit (normal approximation, fine for 8 runs against 8); 1 without data.
func pValue(r *results, unit, load string) float64 {
	a := r.find("bench", "HTTP", "target", "faucet", "load", load)
	b := r.find("bench", "HTTP", "target", "proxy", "load", load)
	if len(a) != 1 || len(b) != 1 {
		return 1
	}
	x, y := a[0].values[unit], b[0].values[unit]
	u := 0.0
	for _, xi := range x {
		for _, yi := range y {
			switch {
			case xi > yi:
				u++
			case xi == yi:
				u += 0.5
			}
		}
	}
	n1, n2 := float64(len(x)), float64(len(y))
	mu, sigma := n1*n2/2, math.Sqrt(n1*n2*(n1+n2+1)/12)
	if sigma == 0 {
		return 1
	}
	return math.Erfc(math.Abs(u-mu) / sigma / math.Sqrt2)
}
