package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two rounds of the denying targets at 16 connections: faucet serve, NGINX
// and the bare Go server that writes serve's 429.
const denyRounds = `goos: linux
BenchmarkHTTP/target=faucet-deny/load=conns16 1 1 ns/op 40000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 22000 server-cpu-ns/op
BenchmarkHTTP/target=nginx-deny/load=conns16 1 1 ns/op 44000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 14000 server-cpu-ns/op
BenchmarkHTTP/target=go-429/load=conns16 1 1 ns/op 50000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 16000 server-cpu-ns/op
BenchmarkHTTP/target=faucet-deny/load=conns16 1 1 ns/op 42000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 24000 server-cpu-ns/op
BenchmarkHTTP/target=nginx-deny/load=conns16 1 1 ns/op 46200 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 14400 server-cpu-ns/op
BenchmarkHTTP/target=go-429/load=conns16 1 1 ns/op 50000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 16000 server-cpu-ns/op
`

// withoutFloor is denyRounds without go-429, as results from before it.
func withoutFloor() string {
	var b strings.Builder
	for line := range strings.Lines(denyRounds) {
		if !strings.Contains(line, "target=go-429") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func writeHTTP(t *testing.T, raw string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "2026-11-29-abc1234-http.txt"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The floor table sets faucet serve's denial against go-429 round by
// round, oriented as the NGINX table (above 1 faucet does better), with
// the CPU difference in µs and NGINX's denial against the same floor.
func TestFloorTable(t *testing.T) {
	got, err := httpSection(writeHTTP(t, denyRounds))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| conns16 | go-429 | 50000 |",
		"The floor: a bare Go server answering 429",
		// req/s 0.80 and 0.84; CPU 16/22 and 16/24; 6 and 8 µs more;
		// NGINX 0.88 and 0.924, 16/14 and 16/14.4.
		"| conns16 | 0.820 | 0.697 | +7.0 µs | 0.902, 1.127 |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	if got := floorTable(mustLoad(t, withoutFloor()), []string{"conns16"}); got != "" {
		t.Errorf("without go-429 rows: %q, want nothing", got)
	}
}

// The summary's denial rows: 429s/s against NGINX and the floor, and CPU
// per 429 against the same two, each ratio above 1 where faucet does
// better. Without the floor's rows the 429s/s row is as it was and there
// is no CPU row.
func TestDenySummary(t *testing.T) {
	rows, err := httpSummary(writeHTTP(t, denyRounds))
	if err != nil {
		t.Fatal(err)
	}
	table := summaryTable(rows, "")
	for _, want := range []string{
		"| HTTP edge, 16 connections, every request denied: 429s/s | 41000 req/s | NGINX limit_req 0.91×, bare Go 429 server 0.82× | [HTTP](#http-faucet-serve-on-loopback) |\n",
		"| HTTP edge, 16 connections, every request denied: CPU per 429 | 23.0 µs | NGINX limit_req 0.62×, bare Go 429 server 0.70× | [HTTP](#http-faucet-serve-on-loopback) |\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("summary lacks\n%s\nin\n%s", want, table)
		}
	}

	rows, err = httpSummary(writeHTTP(t, withoutFloor()))
	if err != nil {
		t.Fatal(err)
	}
	table = summaryTable(rows, "")
	if want := "| HTTP edge, 16 connections, every request denied: 429s/s | 41000 req/s | NGINX limit_req 0.91× | [HTTP](#http-faucet-serve-on-loopback) |\n"; !strings.Contains(table, want) {
		t.Errorf("summary lacks\n%s\nin\n%s", want, table)
	}
	if strings.Contains(table, "CPU per 429") || strings.Contains(table, "bare Go") {
		t.Errorf("summary without go-429 rows shows the floor:\n%s", table)
	}
}

func mustLoad(t *testing.T, raw string) *results {
	t.Helper()
	dir := writeHTTP(t, raw)
	r, err := load(filepath.Join(dir, "2026-11-29-abc1234-http.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The engine table sets faucet serve's CPU per request beside the bare
// servers' and NGINX's, as medians; without fasthttp rows it is absent.
func TestEngineTable(t *testing.T) {
	raw := denyRounds + `BenchmarkHTTP/target=fasthttp-429/load=conns16 1 1 ns/op 50000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 15000 server-cpu-ns/op
BenchmarkHTTP/target=fasthttp-429/load=conns16 1 1 ns/op 50000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 16000 server-cpu-ns/op
BenchmarkHTTP/target=fasthttp-proxy/load=conns16 1 1 ns/op 20000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 1 non200/op 25000 server-cpu-ns/op
`
	got := engineTable(mustLoad(t, raw), []string{"conns16"})
	// faucet-deny 22 and 24, go-429 16, fasthttp-429 15 and 16, nginx-deny
	// 14 and 14.4; no admitted faucet or nginx rows.
	want := "| conns16 | 23.0 µs | 16.0 µs | 15.5 µs | 14.2 µs | — | 25.0 µs | — |\n"
	if !strings.Contains(got, want) || !strings.Contains(got, "What the HTTP engine costs") {
		t.Errorf("engine table lacks %q:\n%s", want, got)
	}
	if got := engineTable(mustLoad(t, denyRounds), []string{"conns16"}); got != "" {
		t.Errorf("without fasthttp rows: %q, want nothing", got)
	}
}

// The admitted rows of the summary: requests per second against the plain
// proxy and NGINX (on the front page at 16 connections), and CPU per
// request against the same two, above 1 where faucet does better.
func TestAdmittedSummary(t *testing.T) {
	raw := `goos: linux
BenchmarkHTTP/target=faucet/load=conns16 1 1 ns/op 18000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 0 non200/op 40000 server-cpu-ns/op
BenchmarkHTTP/target=proxy/load=conns16 1 1 ns/op 18000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 0 non200/op 48000 server-cpu-ns/op
BenchmarkHTTP/target=nginx-limit/load=conns16 1 1 ns/op 24000 req/s 1 p50-ns 1 p99-ns 1 p99.9-ns 0 non200/op 24000 server-cpu-ns/op
`
	rows, err := httpSummary(writeHTTP(t, raw))
	if err != nil {
		t.Fatal(err)
	}
	table := summaryTable(rows, "")
	for _, want := range []string{
		"| HTTP edge, 16 connections: requests/s | 18000 req/s | plain reverse proxy 1.00×, NGINX limit_req 0.75× |",
		"| HTTP edge, 16 connections: CPU per request | 40.0 µs | plain reverse proxy 1.20×, NGINX limit_req 0.60× |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("summary lacks\n%s\nin\n%s", want, table)
		}
	}
	if !rows[0].brief || rows[1].brief {
		t.Errorf("brief: requests/s %v, CPU %v; want the first alone on the front page", rows[0].brief, rows[1].brief)
	}
}
