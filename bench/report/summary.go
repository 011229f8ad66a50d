package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// summaryRow is one line of the summary table: faucet's figure in one
// scenario, and how it compares with each peer measured beside it.
type summaryRow struct {
	what    string   // the scenario
	faucet  string   // faucet's figure, with its unit
	against []versus // in the order the peers are listed
	section string   // heading of the section the figures come from
	label   string   // the link's text
	brief   bool     // also in the README's short table (readmeTable)
}

// versus is faucet's figure over a peer's, oriented so that above 1 faucet
// does better: the peer's time or bytes over faucet's, faucet's rate over
// the peer's.
type versus struct {
	peer string
	x    float64
	note string // which faucet variant, where a row has several
}

// peerNames are the names the summary gives the benchmarks' impl labels.
var peerNames = map[string]string{
	"xtime":           "x/time/rate",
	"xtime_syncmap":   "x/time/rate + sync.Map",
	"xtime_xsyncmap":  "x/time/rate + xsync.MapOf",
	"sethvargo":       "sethvargo/go-limiter",
	"juju":            "juju/ratelimit",
	"uber":            "uber-go/ratelimit",
	"throttled":       "throttled",
	"ulule":           "ulule/limiter",
	"textbook":        "map + mutex",
	"redis_rate":      "go-redis/redis_rate",
	"envoy_ratelimit": "envoyproxy/ratelimit",
	"for_update":      "SELECT … FOR UPDATE",
	"proxy":           "plain reverse proxy",
	"nginx-limit":     "NGINX limit_req",
	"nginx-deny":      "NGINX limit_req",
	"go-429":          "bare Go 429 server",
	"fasthttp-429":    "bare fasthttp 429 server",
}

// peerOrder is the order of the peers within a summary cell: the standard
// library's first, the textbook last.
var peerOrder = []string{"xtime", "xtime_syncmap", "xtime_xsyncmap", "sethvargo", "juju", "uber", "throttled", "ulule", "textbook"}

// cell is v as a summary table shows it: "x/time/rate 1.74×".
func (v versus) cell() string {
	c := fmt.Sprintf("%s %.2f×", v.peer, v.x)
	if v.note != "" {
		c += " (" + v.note + ")"
	}
	return c
}

func peerName(impl string) string {
	if n, ok := peerNames[impl]; ok {
		return n
	}
	return impl
}

// summaryScenarios are the BenchmarkAllow rows the summary shows.
var summaryScenarios = []struct{ scen, mode, what string }{
	{"hot", "allow", "one key, one goroutine"},
	{"hot", "deny", "one key, every check denied"},
	{"many", "allow", "1e6 keys, uniform order"},
	{"zipf", "allow", "1e6 keys, Zipf order"},
	{"par-distinct", "allow", "%d cores, keys of their own"},
	{"par-hot", "allow", "%d cores, one key"},
}

// summarize collects the summary rows from the run at prefix and the newest
// results of the other scripts beside it. A benchmark without results adds
// no row.
func summarize(prefix string) ([]summaryRow, error) {
	var rows []summaryRow
	allow, err := load(prefix + "-allow.txt")
	if err != nil {
		return nil, err
	}
	for _, sc := range summaryScenarios {
		f, ok := allow.medianOf("sec/op", "bench", "Allow", "impl", "faucet", "scen", sc.scen, "mode", sc.mode)
		if !ok {
			continue
		}
		what := sc.what
		if strings.Contains(what, "%d") {
			what = fmt.Sprintf(what, procsOf(allow))
		}
		row := summaryRow{what: what, faucet: ns(f) + " per check", section: scenHeading(sc.scen),
			label: "scen=" + sc.scen + ", mode=" + sc.mode, brief: sc.mode == "allow"}
		ran := allow.impls("bench", "Allow", "scen", sc.scen, "mode", sc.mode)
		for _, im := range orderPeers(ran) {
			if p, ok := allow.medianOf("sec/op", "bench", "Allow", "impl", im, "scen", sc.scen, "mode", sc.mode); ok {
				row.against = append(row.against, versus{peer: peerName(im), x: p / f})
			}
		}
		rows = append(rows, row)
	}
	if mem, err := load(prefix + "-memory.txt"); err == nil {
		if fb, ok := mem.medianOf("B/key", "bench", "Memory", "impl", "faucet"); ok {
			row := summaryRow{what: "memory per live key at 1e6 keys", faucet: fmt.Sprintf("%.1f B", fb), section: memoryHeading, label: "memory", brief: true}
			for _, im := range orderPeers(mem.impls("bench", "Memory")) {
				if v, ok := mem.medianOf("B/key", "bench", "Memory", "impl", im); ok {
					row.against = append(row.against, versus{peer: peerName(im), x: v / fb})
				}
			}
			rows = append(rows, row)
		}
	}
	dir := filepath.Dir(prefix)
	more, err := storeSummary(dir)
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)
	more, err = httpSummary(dir)
	if err != nil {
		return nil, err
	}
	return append(rows, more...), nil
}

// storeSummary is the rows of the Redis store, the rate-limit service and
// the PostgreSQL store, each at the fewest and the most callers.
func storeSummary(dir string) ([]summaryRow, error) {
	var rows []summaryRow
	file, r, err := newest(dir, "-redis.txt")
	if err != nil {
		return nil, err
	}
	if file != "" {
		get := func(unit, bench, impl, by, c string) float64 {
			v, _ := r.medianOf(unit, "bench", bench, "impl", impl, by, c)
			return v
		}
		callers := ends(r.distinct("callers", "bench", "Redis"))
		for i, c := range callers {
			f, p := get("checks/s", "Redis", "faucet", "callers", c), get("checks/s", "Redis", "redis_rate", "callers", c)
			if f == 0 || p == 0 {
				continue
			}
			rows = append(rows, summaryRow{what: "Redis store, " + plural(c, "caller"), faucet: fmt.Sprintf("%.0f checks/s", f),
				against: []versus{{peer: peerName("redis_rate"), x: f / p}}, section: redisHeading, label: "Redis", brief: i == len(callers)-1})
		}
		streams := ends(r.distinct("streams", "bench", "RLS"))
		for i, c := range streams {
			ref := get("checks/s", "RLS", "envoy_ratelimit", "streams", c)
			fr, fm := get("checks/s", "RLS", "faucet_redis", "streams", c), get("checks/s", "RLS", "faucet", "streams", c)
			if ref == 0 || fr == 0 {
				continue
			}
			row := summaryRow{what: "Envoy rate-limit service, " + plural(c, "stream"), section: rlsHeading, label: "rate-limit service", brief: i == len(streams)-1,
				faucet:  fmt.Sprintf("%.0f req/s on Redis", fr),
				against: []versus{{peer: peerName("envoy_ratelimit"), x: fr / ref, note: "faucet on Redis"}}}
			if fm > 0 {
				row.faucet += fmt.Sprintf(", %.0f in memory", fm)
				row.against = append(row.against, versus{peer: peerName("envoy_ratelimit"), x: fm / ref, note: "faucet in memory"})
			}
			rows = append(rows, row)
		}
	}
	file, r, err = newest(dir, "-postgres.txt")
	if err != nil || file == "" {
		return rows, err
	}
	for _, k := range r.distinct("keys", "bench", "Postgres") {
		for _, c := range ends(r.distinct("callers", "bench", "Postgres")) {
			f, _ := r.medianOf("checks/s", "bench", "Postgres", "keys", k, "impl", "faucet", "callers", c)
			p, _ := r.medianOf("checks/s", "bench", "Postgres", "keys", k, "impl", "for_update", "callers", c)
			if f == 0 || p == 0 {
				continue
			}
			keys := plural(k, "key")
			if k == "1" {
				keys = "one hot key"
			}
			rows = append(rows, summaryRow{what: "PostgreSQL store, " + keys + ", " + plural(c, "caller"),
				faucet: fmt.Sprintf("%.0f checks/s", f), against: []versus{{peer: peerName("for_update"), x: f / p}}, section: postgresHeading, label: "PostgreSQL"})
		}
	}
	return rows, nil
}

// httpSummary is the rows of faucet serve against a plain reverse proxy:
// p99 latency at a fixed rate, requests per second over a fixed number of
// connections.
func httpSummary(dir string) ([]summaryRow, error) {
	file, r, err := newest(dir, "-http.txt")
	if err != nil || file == "" {
		return nil, err
	}
	var rows []summaryRow
	for _, l := range r.distinct("load", "bench", "HTTP") {
		switch {
		case strings.HasPrefix(l, "rate"):
			f, _ := r.medianOf("p99-sec", "bench", "HTTP", "target", "faucet", "load", l)
			p, _ := r.medianOf("p99-sec", "bench", "HTTP", "target", "proxy", "load", l)
			if f == 0 || p == 0 {
				continue
			}
			rows = append(rows, summaryRow{what: "HTTP edge, open loop at " + strings.TrimPrefix(l, "rate") + " req/s: p99 latency",
				faucet: ms(f), against: []versus{{peer: peerName("proxy"), x: p / f}}, section: httpHeading, label: "HTTP"})
		case strings.HasPrefix(l, "conns"):
			f, _ := r.medianOf("req/s", "bench", "HTTP", "target", "faucet", "load", l)
			x := paired(r, "req/s", l, "faucet", "proxy", func(a, b float64) float64 { return a / b })
			if f != 0 && x != 0 {
				row := summaryRow{what: "HTTP edge, " + strings.TrimPrefix(l, "conns") + " connections: requests/s",
					faucet: fmt.Sprintf("%.0f req/s", f), against: []versus{{peer: peerName("proxy"), x: x}}, section: httpHeading, label: "HTTP"}
				if n := paired(r, "req/s", l, "faucet", "nginx-limit", func(a, b float64) float64 { return a / b }); n != 0 {
					row.against = append(row.against, versus{peer: peerName("nginx-limit"), x: n})
					// The front page shows the edge against the limiter
					// teams would otherwise keep.
					row.brief = l == "conns16"
				}
				rows = append(rows, row)
				if cpu, _ := r.medianOf("server-cpu-sec/op", "bench", "HTTP", "target", "faucet", "load", l); cpu != 0 {
					c := summaryRow{what: "HTTP edge, " + strings.TrimPrefix(l, "conns") + " connections: CPU per request",
						faucet: fmt.Sprintf("%.1f µs", cpu*1e6), section: httpHeading, label: "HTTP"}
					for _, peer := range []string{"proxy", "nginx-limit"} {
						if x := paired(r, "server-cpu-sec/op", l, peer, "faucet", func(a, b float64) float64 { return a / b }); x != 0 {
							c.against = append(c.against, versus{peer: peerName(peer), x: x})
						}
					}
					rows = append(rows, c)
				}
			}
			rows = append(rows, denySummary(r, l)...)
			rows = append(rows, fastSummary(r, l)...)
		}
	}
	return rows, nil
}

// denySummary is the rows of faucet serve denying every request, at load l
// over a fixed number of connections: its 429s per second against NGINX's
// limit_req and against the floor, a bare Go server writing the same 429
// (go-429), and, where the floor was measured, its CPU time per 429 against
// the same two.
func denySummary(r *results, l string) []summaryRow {
	fd, _ := r.medianOf("req/s", "bench", "HTTP", "target", "faucet-deny", "load", l)
	if fd == 0 {
		return nil
	}
	div := func(a, b float64) float64 { return a / b }
	what := "HTTP edge, " + strings.TrimPrefix(l, "conns") + " connections, every request denied: "
	rate := summaryRow{what: what + "429s/s", faucet: fmt.Sprintf("%.0f req/s", fd), section: httpHeading, label: "HTTP"}
	for _, peer := range []string{"nginx-deny", "go-429"} {
		if x := paired(r, "req/s", l, "faucet-deny", peer, div); x != 0 {
			rate.against = append(rate.against, versus{peer: peerName(peer), x: x})
		}
	}
	if len(rate.against) == 0 {
		return nil
	}
	rows := []summaryRow{rate}
	cpu, _ := r.medianOf("server-cpu-sec/op", "bench", "HTTP", "target", "faucet-deny", "load", l)
	floor := paired(r, "server-cpu-sec/op", l, "go-429", "faucet-deny", div)
	if cpu == 0 || floor == 0 {
		return rows
	}
	row := summaryRow{what: what + "CPU per 429", faucet: fmt.Sprintf("%.1f µs", cpu*1e6), section: httpHeading, label: "HTTP"}
	if x := paired(r, "server-cpu-sec/op", l, "nginx-deny", "faucet-deny", div); x != 0 {
		row.against = append(row.against, versus{peer: peerName("nginx-deny"), x: x})
	}
	row.against = append(row.against, versus{peer: peerName("go-429"), x: floor})
	return append(rows, row)
}

// fastSummary is the rows of faucet serve with its public listener on
// fasthttp, at load l over a fixed number of connections, where it ran: its
// CPU time per admitted request against the plain proxy and NGINX's
// limit_req, and per 429 against NGINX's and the same 429 on fasthttp
// alone (fasthttp-429).
func fastSummary(r *results, l string) []summaryRow {
	div := func(a, b float64) float64 { return a / b }
	what := "HTTP edge on fasthttp, " + strings.TrimPrefix(l, "conns") + " connections"
	var rows []summaryRow
	for _, c := range []struct {
		target, what string
		peers        []string
	}{
		{"faucet-fasthttp", ": CPU per request", []string{"proxy", "nginx-limit"}},
		{"faucet-fasthttp-deny", ", every request denied: CPU per 429", []string{"nginx-deny", "fasthttp-429"}},
	} {
		cpu, _ := r.medianOf("server-cpu-sec/op", "bench", "HTTP", "target", c.target, "load", l)
		if cpu == 0 {
			continue
		}
		row := summaryRow{what: what + c.what, faucet: fmt.Sprintf("%.1f µs", cpu*1e6), section: httpHeading, label: "HTTP"}
		for _, peer := range c.peers {
			if x := paired(r, "server-cpu-sec/op", l, peer, c.target, div); x != 0 {
				row.against = append(row.against, versus{peer: peerName(peer), x: x})
			}
		}
		if len(row.against) > 0 {
			rows = append(rows, row)
		}
	}
	return rows
}

// orderPeers returns the impls other than faucet's own, in peerOrder and
// then in the order given.
func orderPeers(impls []string) []string {
	var out []string
	for _, p := range peerOrder {
		for _, im := range impls {
			if im == p {
				out = append(out, im)
			}
		}
	}
	for _, im := range impls {
		if !strings.HasPrefix(im, "faucet") && !slices.Contains(peerOrder, im) {
			out = append(out, im)
		}
	}
	return out
}

// ends is the first and the last of xs (once if they are the same).
func ends(xs []string) []string {
	if len(xs) < 2 {
		return xs
	}
	return []string{xs[0], xs[len(xs)-1]}
}

// plural writes n and noun, with an s unless n is 1.
func plural(n, noun string) string {
	if n == "1" {
		return n + " " + noun
	}
	return n + " " + noun + "s"
}

// procsOf is GOMAXPROCS of faucet's parallel rows, 2 if the names lack it.
func procsOf(r *results) int {
	procs := 2
	for _, s := range r.find("bench", "Allow", "impl", "faucet") {
		if s.procs > 0 {
			procs = s.procs
		}
	}
	return procs
}

// summaryTable renders rows as a Markdown table whose section links point
// into the document at doc (relative to where the table is written; "" for
// the document itself).
func summaryTable(rows []summaryRow, doc string) string {
	var b strings.Builder
	b.WriteString("Each ratio is faucet's figure against the peer's, so that above 1× faucet does\n")
	b.WriteString("better: the peer's time per check, p99 or bytes per key over faucet's, faucet's\n")
	b.WriteString("checks or requests per second over the peer's. Medians of the runs in the section linked.\n\n")
	b.WriteString("| scenario | faucet | against | measured in |\n|---|---|---|---|\n")
	for _, r := range rows {
		var cells []string
		for _, v := range r.against {
			cells = append(cells, v.cell())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | [%s](%s#%s) |\n", r.what, r.faucet, strings.Join(cells, ", "), r.label, doc, anchor(r.section))
	}
	return b.String()
}

// anchor is the fragment GitHub gives a Markdown heading: lower case,
// spaces and hyphens as hyphens, letters, digits and underscores kept,
// everything else dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
