package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// httpTarget is the limit on what faucet serve may add to the p99 latency of
// a request over a plain reverse proxy at the same open-loop rate.
const httpTarget = 1.05

// Closed-loop targets: faucet serve's requests per second at least
// httpMinRate of the plain proxy's, and its CPU per request at most
// httpMaxCPU above the proxy's.
const (
	httpMinRate = 0.97
	httpMaxCPU  = 3e-6 // seconds
)

// httpSection renders the load test of faucet serve from the newest
// results/*-http.txt (bench/http.sh), or "" if there is none. It has its own
// results file because it runs processes, not go test.
func httpSection(dir string) (string, error) {
	file, r, err := newest(dir, "-http.txt")
	if file == "" || err != nil {
		return "", err
	}
	loads := r.distinct("load", "bench", "HTTP")
	var b strings.Builder
	fmt.Fprintf(&b, "\n## HTTP: faucet serve on loopback\n\n")
	fmt.Fprintf(&b, "`bench/http.sh` runs an upstream, a plain reverse proxy (the same transport and\n")
	fmt.Fprintf(&b, "forwarding as faucet serve, no limiter) and faucet serve, each its own process,\n")
	fmt.Fprintf(&b, "and loads them from a load generator of its own, in turn, a quarter of a second\n")
	fmt.Fprintf(&b, "each, so that what else the machine runs falls on all of them alike: open-loop\n")
	fmt.Fprintf(&b, "at a fixed rate (latency counted from each request's scheduled time) and\n")
	fmt.Fprintf(&b, "closed-loop with concurrent connections (bare, the upstream, which serves the\n")
	fmt.Fprintf(&b, "others' requests too, in runs of its own). faucet runs a per-IP rule that never binds;\n")
	fmt.Fprintf(&b, "faucet-deny the built-in rule (5 rps per IP), so nearly every request is a 429\n")
	fmt.Fprintf(&b, "that never reaches the upstream. Medians of the rounds in `bench/%s`;\n", filepath.ToSlash(file))
	fmt.Fprintf(&b, "all these processes and the load generator share the machine's cores. proxy2 is a\n")
	fmt.Fprintf(&b, "second plain proxy, identical to proxy: how far apart the two are is the noise.\n")
	fmt.Fprintf(&b, "proxy-linked is the plain proxy built with the libraries faucet serve links (gRPC,\n")
	fmt.Fprintf(&b, "Envoy's protocol, Postgres, Redis, JWT, Prometheus, and faucet's own packages,\n")
	fmt.Fprintf(&b, "whose init functions build their descriptors and registries): it does what proxy\n")
	fmt.Fprintf(&b, "does, so what it costs over proxy is the weight of serve's binary alone, and\n")
	fmt.Fprintf(&b, "what faucet costs over it is what serve itself does per request.\n\n")
	fmt.Fprintf(&b, "| load | target | req/s | p50 | p99 | p99.9 | CPU per request | non-200 |\n|---|---|---|---|---|---|---|---|\n")
	for _, l := range loads {
		for _, t := range []string{"bare", "proxy", "proxy2", "proxy-linked", "faucet", "faucet-deny"} {
			get := func(unit string) float64 { v, _ := r.medianOf(unit, "bench", "HTTP", "target", t, "load", l); return v }
			if get("req/s") == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %.1f µs | %.2f %% |\n", l, t, get("req/s"),
				ms(get("p50-sec")), ms(get("p99-sec")), ms(get("p99.9-sec")), get("server-cpu-sec/op")*1e6, 100*get("non200/op"))
		}
	}
	b.WriteString("\n| load | faucet p99 / proxy p99 | target | met | p (Mann-Whitney, p99) | faucet req/s / proxy req/s (median of the rounds) | faucet CPU − proxy CPU per request (median of the rounds) | target | met | noise: proxy2 req/s / proxy req/s, CPU − proxy CPU (same) | proxy-linked req/s / proxy req/s, CPU − proxy CPU (same) | faucet req/s / proxy-linked req/s, CPU − proxy-linked CPU (same) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
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
		dc, fr := cpu("faucet", "proxy"), rate("faucet", "proxy")
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
		target, met := "—", "—"
		p := pValue(r, "p99-sec", l)
		if strings.HasPrefix(l, "rate") {
			target = fmt.Sprintf("≤ %.2f", httpTarget)
			switch {
			case fp/pp <= httpTarget:
				met = "yes"
			case p < 0.05:
				met = "**no**"
			default:
				met = "not significant: within the noise"
			}
		}
		closedTarget, closedMet := "—", "—"
		if strings.HasPrefix(l, "conns") {
			closedTarget = fmt.Sprintf("req/s ≥ %.2f, CPU ≤ %+.0f µs", httpMinRate, httpMaxCPU*1e6)
			closedMet = "yes"
			if fr < httpMinRate || dc > httpMaxCPU {
				closedMet = "**no**"
			}
		}
		fmt.Fprintf(&b, "| %s | %.3f | %s | %s | %.2f | %.3f | %+.1f µs | %s | %s | %s | %s | %s |\n", l, fp/pp, target, met,
			p, fr, dc*1e6, closedTarget, closedMet, noise, weight, own)
	}
	check, err := checkSection(dir)
	if err != nil {
		return "", err
	}
	b.WriteString(check)
	b.WriteString("\nReproduce: `cd bench && ./http.sh` (about 10 minutes).\n")
	return b.String(), nil
}

// checkSection renders the limiter's own cost per request, without a
// network (httplimit's BenchmarkCheck, run by http.sh), from the newest
// results/*-check.txt, or "" if there is none.
func checkSection(dir string) (string, error) {
	file, r, err := newest(dir, "-check.txt")
	if file == "" || err != nil {
		return "", err
	}
	table, err := benchstat(file)
	if err != nil {
		return "", err
	}
	verdict := "0 in every row: met"
	for _, s := range r.find("bench", "Check") {
		if a := median(s.values["allocs/op"]); a != 0 {
			verdict = fmt.Sprintf("**%v in rules=%s: not met**", a, s.config["rules"])
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe limiter's own cost per admitted request, without a network, rate-limit\n")
	fmt.Fprintf(&b, "fields included: `BenchmarkCheck` in package httplimit, through Handler, with\n")
	fmt.Fprintf(&b, "one rule per IP and with three rules (an unverified JWT claim, a header, the\n")
	fmt.Fprintf(&b, "method); raw output in `bench/%s`. Target: 0 allocations per\n", filepath.ToSlash(file))
	fmt.Fprintf(&b, "request; %s. BenchmarkCheck repeats one request in a tight loop, where\n", verdict)
	fmt.Fprintf(&b, "the limiter's code and data stay in L1: it counts instructions, not cache\n")
	fmt.Fprintf(&b, "misses. `BenchmarkCheckCold` empties the caches before each request, as a\n")
	fmt.Fprintf(&b, "server's other work between requests does: cache=l3 writes 8 MiB (more than a\n")
	fmt.Fprintf(&b, "core's L1 and L2), cache=dram 128 MiB (more than most L3s); rules=none is the\n")
	fmt.Fprintf(&b, "harness alone, to subtract. A request in a server pays for some of those misses,\n")
	fmt.Fprintf(&b, "which the tight loop never shows.\n\n```\n%s\n```\n", strings.TrimSpace(table))
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
