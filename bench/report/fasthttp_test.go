package main

import (
	"strings"
	"testing"
)

// Two rounds at 16 connections of every target that the fasthttp engine's
// rows compare: serve on either engine, the plain proxy, the bare 429
// servers and NGINX; the denying ones are denyRounds'.
const fastRounds = denyRounds + `BenchmarkHTTP/target=proxy/load=conns16 1 1 ns/op 18000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 0 non200/op 48000 server-cpu-ns/op
BenchmarkHTTP/target=faucet/load=conns16 1 1 ns/op 18000 req/s 1 p50-ns 3 p99-ns 1 p99.9-ns 0 non200/op 40000 server-cpu-ns/op
BenchmarkHTTP/target=nginx/load=conns16 1 1 ns/op 24000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 0 non200/op 23000 server-cpu-ns/op
BenchmarkHTTP/target=nginx-limit/load=conns16 1 1 ns/op 24000 req/s 1 p50-ns 3 p99-ns 1 p99.9-ns 0 non200/op 24000 server-cpu-ns/op
BenchmarkHTTP/target=faucet-fasthttp/load=conns16 1 1 ns/op 21600 req/s 1 p50-ns 2 p99-ns 1 p99.9-ns 0 non200/op 30000 server-cpu-ns/op
BenchmarkHTTP/target=faucet-fasthttp-deny/load=conns16 1 1 ns/op 45000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 15000 server-cpu-ns/op
BenchmarkHTTP/target=fasthttp-429/load=conns16 1 1 ns/op 50000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 12000 server-cpu-ns/op
BenchmarkHTTP/target=proxy/load=conns16 1 1 ns/op 18000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 0 non200/op 48000 server-cpu-ns/op
BenchmarkHTTP/target=faucet/load=conns16 1 1 ns/op 18000 req/s 1 p50-ns 3 p99-ns 1 p99.9-ns 0 non200/op 42000 server-cpu-ns/op
BenchmarkHTTP/target=nginx/load=conns16 1 1 ns/op 24000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 0 non200/op 23000 server-cpu-ns/op
BenchmarkHTTP/target=nginx-limit/load=conns16 1 1 ns/op 24000 req/s 1 p50-ns 3 p99-ns 1 p99.9-ns 0 non200/op 25600 server-cpu-ns/op
BenchmarkHTTP/target=faucet-fasthttp/load=conns16 1 1 ns/op 22800 req/s 1 p50-ns 2 p99-ns 1 p99.9-ns 0 non200/op 32000 server-cpu-ns/op
BenchmarkHTTP/target=faucet-fasthttp-deny/load=conns16 1 1 ns/op 47500 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 16000 server-cpu-ns/op
BenchmarkHTTP/target=fasthttp-429/load=conns16 1 1 ns/op 50000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 12800 server-cpu-ns/op
`

// withoutServeOnFasthttp is raw without serve's fasthttp targets, as
// results from before the engine.
func withoutServeOnFasthttp(raw string) string {
	var b strings.Builder
	for line := range strings.Lines(raw) {
		if !strings.Contains(line, "target=faucet-fasthttp") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// Serve on fasthttp gets rows of its own against the same NGINX targets as
// serve on net/http, round by round and oriented alike; NGINX's own
// column stays with the net/http row.
func TestNginxTableFasthttp(t *testing.T) {
	got := nginxTable(mustLoad(t, fastRounds), []string{"conns16"})
	// never binds: 18000/24000; 24/40 and 25.6/42; 3/3; NGINX 1 and
	// 24/23, 25.6/23. On fasthttp: 21600/24000 and 22800/24000; 24/30 and
	// 25.6/32; 3/2. denies (fasthttp): 45000/44000 and 47500/46200;
	// 14/15 and 14.4/16.
	want := "| conns16 | never binds | 0.750 | 0.605 | 1.000 | 1.000, 1.078 |\n" +
		"| conns16 | never binds (fasthttp) | 0.925 | 0.800 | 1.500 | — |\n" +
		"| conns16 | denies | 0.909 | 0.618 | 1.000 | — |\n" +
		"| conns16 | denies (fasthttp) | 1.025 | 0.917 | 1.000 | — |\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("NGINX table ends\n%s\nwant\n%s", got, want)
	}
}

// Without serve's fasthttp targets the NGINX, floor and engine tables are
// what they were before the engine existed, byte for byte.
func TestHTTPTablesWithoutServeOnFasthttp(t *testing.T) {
	raw := withoutServeOnFasthttp(fastRounds)
	r, loads := mustLoad(t, raw), []string{"conns16"}
	for name, c := range map[string]struct{ got, want string }{
		"nginx": {nginxTable(r, loads), "\nAgainst NGINX's `limit_req` (medians of the rounds' ratios; above 1 faucet serve does better):\n\n" +
			"| load | rule | req/s, faucet / NGINX | CPU per request, NGINX / faucet | p99, NGINX / faucet | NGINX's limit_req against its plain proxy: req/s, CPU |\n|---|---|---|---|---|---|\n" +
			"| conns16 | never binds | 0.750 | 0.605 | 1.000 | 1.000, 1.078 |\n" +
			"| conns16 | denies | 0.909 | 0.618 | 1.000 | — |\n"},
		"floor": {floorTable(r, loads), "\nThe floor: a bare Go server answering 429 (`go-429`: faucet-deny's status, header fields and body, written\n" +
			"as constants, no limiter; medians of the rounds' ratios and differences, 1 and 0 where faucet serve is at the floor):\n\n" +
			"| load | req/s, faucet-deny / go-429 | CPU per request, go-429 / faucet-deny | CPU per request, faucet-deny − go-429 | NGINX's denial against the floor: req/s, nginx-deny / go-429; CPU, go-429 / nginx-deny |\n|---|---|---|---|---|\n" +
			"| conns16 | 0.820 | 0.697 | +7.0 µs | 0.902, 1.127 |\n"},
		"engine": {engineTable(r, loads), "\nWhat the HTTP engine costs: CPU per request (median of the rounds) of faucet serve, of servers that do\n" +
			"the same job without a limiter on net/http (`go-429`) and on fasthttp (`fasthttp-429`, and `fasthttp-proxy`, a\n" +
			"proxy that only adds X-Forwarded-For), and of NGINX:\n\n" +
			"| load | denied: faucet-deny | go-429 | fasthttp-429 | nginx-deny | admitted: faucet | fasthttp-proxy | nginx |\n|---|---|---|---|---|---|---|---|\n" +
			"| conns16 | 23.0 µs | 16.0 µs | 12.4 µs | 14.2 µs | 41.0 µs | — | 23.0 µs |\n"},
	} {
		if c.got != c.want {
			t.Errorf("%s table without serve on fasthttp:\n%s\nwant\n%s", name, c.got, c.want)
		}
	}
	got, err := httpSection(writeHTTP(t, raw))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "faucet-fasthttp") {
		t.Errorf("section without serve on fasthttp names it:\n%s", got)
	}
}

// The floor table gains a column for serve's denial on fasthttp against
// fasthttp's bare 429, its own floor; the net/http columns stay as they
// were.
func TestFloorTableFasthttp(t *testing.T) {
	got := floorTable(mustLoad(t, fastRounds), []string{"conns16"})
	for _, want := range []string{
		"on fasthttp, faucet-fasthttp-deny against `fasthttp-429`",
		"| NGINX's denial against the floor: req/s, nginx-deny / go-429; CPU, go-429 / nginx-deny | on fasthttp: req/s, faucet-fasthttp-deny / fasthttp-429; CPU, fasthttp-429 / faucet-fasthttp-deny; CPU, faucet-fasthttp-deny − fasthttp-429 |\n|---|---|---|---|---|---|\n",
		// 45000/50000 and 47500/50000; 12/15 and 12.8/16; 3 and 3.2 µs
		// more.
		"| conns16 | 0.820 | 0.697 | +7.0 µs | 0.902, 1.127 | 0.925, 0.800, +3.1 µs |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("floor table lacks %q:\n%s", want, got)
		}
	}
}

// The engine table sets serve on fasthttp beside serve on net/http, denied
// and admitted.
func TestEngineTableFasthttp(t *testing.T) {
	got := engineTable(mustLoad(t, fastRounds), []string{"conns16"})
	for _, want := range []string{
		"of faucet serve on net/http and on\nfasthttp (`faucet-fasthttp-deny` and `faucet-fasthttp`, with `--http-engine fasthttp`), of servers",
		"| load | denied: faucet-deny | faucet-fasthttp-deny | go-429 | fasthttp-429 | nginx-deny | admitted: faucet | faucet-fasthttp | fasthttp-proxy | nginx |\n|---|---|---|---|---|---|---|---|---|---|\n",
		"| conns16 | 23.0 µs | 15.5 µs | 16.0 µs | 12.4 µs | 14.2 µs | 41.0 µs | 31.0 µs | — | 23.0 µs |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("engine table lacks %q:\n%s", want, got)
		}
	}
}

// The summary's rows for serve on fasthttp: CPU per request against the
// plain proxy and NGINX, CPU per 429 against NGINX and fasthttp's bare
// 429, after the net/http rows and never on the front page; without the
// targets, the summary is as it was.
func TestFastSummary(t *testing.T) {
	rows, err := httpSummary(writeHTTP(t, fastRounds))
	if err != nil {
		t.Fatal(err)
	}
	table := summaryTable(rows, "")
	for _, want := range []string{
		// 48/30 and 48/32; 24/30 and 25.6/32.
		"| HTTP edge on fasthttp, 16 connections: CPU per request | 31.0 µs | plain reverse proxy 1.55×, NGINX limit_req 0.80× | [HTTP](#http-faucet-serve-on-loopback) |\n",
		// 14/15 and 14.4/16; 12/15 and 12.8/16.
		"| HTTP edge on fasthttp, 16 connections, every request denied: CPU per 429 | 15.5 µs | NGINX limit_req 0.92×, bare fasthttp 429 server 0.80× | [HTTP](#http-faucet-serve-on-loopback) |\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("summary lacks\n%s\nin\n%s", want, table)
		}
	}
	if i, j := strings.Index(table, "CPU per 429 | 23.0 µs"), strings.Index(table, "on fasthttp"); i < 0 || j < i {
		t.Errorf("fasthttp rows not after the net/http ones:\n%s", table)
	}
	for _, r := range rows {
		if strings.Contains(r.what, "fasthttp") && r.brief {
			t.Errorf("%q is on the front page", r.what)
		}
	}

	before, err := httpSummary(writeHTTP(t, withoutServeOnFasthttp(fastRounds)))
	if err != nil {
		t.Fatal(err)
	}
	var kept []summaryRow
	for _, r := range rows {
		if !strings.Contains(r.what, "on fasthttp") {
			kept = append(kept, r)
		}
	}
	if a, b := summaryTable(before, ""), summaryTable(kept, ""); a != b {
		t.Errorf("summary without serve on fasthttp:\n%s\nwant the rows with it, less its own:\n%s", a, b)
	}
}
