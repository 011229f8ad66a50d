package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// httpTarget is the limit on what faucet serve may add to the p99 latency of
// a request over a plain reverse proxy at the same open-loop rate.
const httpTarget = 1.05

// httpSection renders the load test of faucet serve from the newest
// results/*-http.txt (bench/http.sh), or "" if there is none. It has its own
// results file because it runs processes, not go test.
func httpSection(dir string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*-http.txt"))
	if len(files) == 0 {
		return "", nil
	}
	sort.Strings(files)
	file := files[len(files)-1]
	r, err := load(file)
	if err != nil {
		return "", err
	}
	var loads []string
	for _, s := range r.find("bench", "HTTP") {
		if l := s.config["load"]; !contains(loads, l) {
			loads = append(loads, l)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## HTTP: faucet serve on loopback\n\n")
	fmt.Fprintf(&b, "`bench/http.sh` runs an upstream, a plain reverse proxy (the same transport and\n")
	fmt.Fprintf(&b, "forwarding as faucet serve, no limiter) and faucet serve, each its own process,\n")
	fmt.Fprintf(&b, "and loads each from a separate load generator: open-loop at a fixed rate\n")
	fmt.Fprintf(&b, "(latency counted from each request's scheduled time) and closed-loop with\n")
	fmt.Fprintf(&b, "concurrent connections. faucet runs a per-IP rule that never binds;\n")
	fmt.Fprintf(&b, "faucet-deny the built-in rule (5 rps per IP), so nearly every request is a 429\n")
	fmt.Fprintf(&b, "that never reaches the upstream. Medians of the rounds in `bench/%s`;\n", filepath.ToSlash(file))
	fmt.Fprintf(&b, "all four processes and the load generator share the machine's cores.\n\n")
	fmt.Fprintf(&b, "| load | target | req/s | p50 | p99 | p99.9 | non-200 |\n|---|---|---|---|---|---|---|\n")
	for _, l := range loads {
		for _, t := range []string{"bare", "proxy", "faucet", "faucet-deny"} {
			get := func(unit string) float64 { v, _ := r.medianOf(unit, "bench", "HTTP", "target", t, "load", l); return v }
			if get("req/s") == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %.2f %% |\n", l, t, get("req/s"),
				ms(get("p50-ns")), ms(get("p99-ns")), ms(get("p99.9-ns")), 100*get("non200/op"))
		}
	}
	b.WriteString("\n| load | faucet p99 / proxy p99 | target | met | faucet req/s / proxy req/s |\n|---|---|---|---|---|\n")
	for _, l := range loads {
		fp, _ := r.medianOf("p99-ns", "bench", "HTTP", "target", "faucet", "load", l)
		pp, _ := r.medianOf("p99-ns", "bench", "HTTP", "target", "proxy", "load", l)
		fr, _ := r.medianOf("req/s", "bench", "HTTP", "target", "faucet", "load", l)
		pr, _ := r.medianOf("req/s", "bench", "HTTP", "target", "proxy", "load", l)
		if pp == 0 || pr == 0 {
			continue
		}
		target, met := "—", "—"
		if strings.HasPrefix(l, "rate") {
			target = fmt.Sprintf("≤ %.2f", httpTarget)
			met = "yes"
			if fp/pp > httpTarget {
				met = "**no**"
			}
		}
		fmt.Fprintf(&b, "| %s | %.3f | %s | %s | %.3f |\n", l, fp/pp, target, met, fr/pr)
	}
	b.WriteString("\nThe limiter's own cost per request, without a network, is `BenchmarkCheck` in\n")
	b.WriteString("package httplimit. Reproduce: `cd bench && ./http.sh` (about 5 minutes).\n")
	return b.String(), nil
}

func ms(ns float64) string { return fmt.Sprintf("%.2f ms", ns/1e6) }

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
