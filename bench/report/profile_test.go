package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An older profile, as written by hand: no recorded time, and a selection
// that lacks syscall.Syscall, which its top frames list.
const oldProfile = `# perf record -e cpu-clock -F 999 -g -p <faucet serve> -- sleep 10, under httpload run --conns 16
# faucet serve built at 2fb9a79; share of samples, cumulative (children) then flat (self)

## allow (per-ip rule that never binds)
# BenchmarkHTTP/target=faucet/load=conns16 171528 1111832 ns/op 14294 req/s 1007615 p50-ns 3549183 p99-ns 5808127 p99.9-ns 0.0000 non200/op 65038 server-cpu-ns/op
# top frames
84.12% 0.00% [.] runtime.goexit.abi0
32.85% 0.19% [.] syscall.Syscall
# selected frames
18.24% 0.26% [.] net/http/httputil.(*ReverseProxy).ServeHTTP
1.59% 0.26% [.] github.com/faucetgo/faucet/httplimit.(*Middleware).decide

## deny (built-in 5 rps rule: nearly every request a 429)
# BenchmarkHTTP/target=deny/load=conns16 478386 390834 ns/op 39866 req/s 244735 p50-ns 3133439 p99-ns 5525503 p99.9-ns 0.9999 non200/op 22849 server-cpu-ns/op
# top frames
86.72% 0.00% [.] runtime.goexit.abi0
# selected frames
14.67% 0.06% [.] github.com/faucetgo/faucet/httplimit.(*Result).WriteProblem
3.12% 0.44% [.] github.com/faucetgo/faucet/httplimit.(*Middleware).decide
`

// A newer one, from bench/httpprofile.sh.
const newProfile = `# perf record -e cpu-clock -F 999 -g -p <faucet serve> -- sleep 10, under httpload run --conns 16 (bench/http.sh's rules; bench/httpprofile.sh)
# faucet serve built at 0aaaaaa; share of samples, cumulative (children) then flat (self); selected frames down to 0.2 %
# recorded 2026-11-29T15:00:00Z

## allow (per-ip rule that never binds)
# BenchmarkHTTP/target=faucet/load=conns16 200000 1000000 ns/op 16000 req/s 1007615 p50-ns 3549183 p99-ns 5808127 p99.9-ns 0.0000 non200/op 60000 server-cpu-ns/op
# top frames
82.49% 0.00% [.] runtime.goexit.abi0
# selected frames
30.72% 0.11% [.] syscall.Syscall
17.00% 0.36% [.] net/http/httputil.(*ReverseProxy).ServeHTTP

## deny (built-in 5 rps rule: nearly every request a 429)
# BenchmarkHTTP/target=faucet-deny/load=conns16 500000 390834 ns/op 42000 req/s 244735 p50-ns 3133439 p99-ns 5525503 p99.9-ns 0.9999 non200/op 20000 server-cpu-ns/op
# top frames
79.05% 0.00% [.] runtime.goexit.abi0
# selected frames
10.50% 0.04% [.] github.com/faucetgo/faucet/httplimit.(*Result).WriteProblem
`

func writeProfiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The section sets the oldest profile beside the newest, frame by frame,
// for both rules; a frame one profile did not select is looked up in its
// top frames, and one it does not list at all is a dash. A file with a
// recorded time is newer than one without of the same date, whatever
// their names.
func TestProfileSectionBeforeAndAfter(t *testing.T) {
	dir := writeProfiles(t, map[string]string{
		"2026-11-29-2fb9a79-http-profile.txt": oldProfile,
		"2026-11-29-0aaaaaa-http-profile.txt": newProfile,
	})
	got, err := profileSection(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### " + profileHeading + "\n",
		"| frame | allow, before | allow, after | deny, before | deny, after |\n|---|---|---|---|---|\n",
		"| requests/s while sampled | 14294 | 16000 | 39866 | 42000 |\n",
		"| CPU per request | 65.0 µs | 60.0 µs | 22.8 µs | 20.0 µs |\n",
		"| `syscall.Syscall` | 32.85 % | 30.72 % | — | — |\n",
		"| `net/http/httputil.(*ReverseProxy).ServeHTTP` | 18.24 % | 17.00 % | — | — |\n",
		"| `httplimit.(*Result).WriteProblem` | — | — | 14.67 % | 10.50 % |\n",
		"| `httplimit.(*Middleware).decide` | 1.59 % | — | 3.12 % | — |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	// Largest share first.
	if i, j := strings.Index(got, "syscall.Syscall"), strings.Index(got, "(*Middleware).decide"); i < 0 || j < i {
		t.Errorf("frames out of order:\n%s", got)
	}
	if strings.Contains(got, "goexit") {
		t.Errorf("a frame no profile selected is shown:\n%s", got)
	}
	if strings.Index(got, "2fb9a79-http-profile.txt") > strings.Index(got, "0aaaaaa-http-profile.txt") {
		t.Errorf("the newer file is linked first:\n%s", got)
	}
}

// With one profile there is nothing to compare: one column per rule.
func TestProfileSectionOneProfile(t *testing.T) {
	got, err := profileSection(writeProfiles(t, map[string]string{"2026-11-29-2fb9a79-http-profile.txt": oldProfile}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| frame | allow | deny |\n|---|---|---|\n",
		"| `httplimit.(*Middleware).decide` | 1.59 % | 3.12 % |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "before") {
		t.Errorf("one profile, yet a before column:\n%s", got)
	}
	if got, err := profileSection(t.TempDir()); got != "" || err != nil {
		t.Errorf("without profiles: %q, %v; want nothing", got, err)
	}
}

// A frame line that is not "children% self% [.] symbol" is an error that
// names the file and the line.
func TestParseProfileRejectsBadFrames(t *testing.T) {
	dir := writeProfiles(t, map[string]string{"2026-11-29-abc1234-http-profile.txt": "## allow\n# selected frames\n18.24% [.] net/http.x\n"})
	_, err := profileSection(dir)
	if err == nil || !strings.Contains(err.Error(), "2026-11-29-abc1234-http-profile.txt:3") {
		t.Errorf("err = %v, want one naming the file and line 3", err)
	}
}

// A profile of serve on fasthttp, from ENGINE=fasthttp bench/httpprofile.sh.
const fastProfile = `# perf record -e cpu-clock -F 999 -g -p <faucet serve> -- sleep 10, under httpload run --conns 16 (bench/http.sh's rules; bench/httpprofile.sh)
# faucet serve built at 0bbbbbb with --http-engine fasthttp; share of samples, cumulative (children) then flat (self); selected frames down to 0.2 %
# recorded 2026-11-30T15:00:00Z

## allow (per-ip rule that never binds)
# BenchmarkHTTP/target=faucet-fasthttp/load=conns16 200000 1000000 ns/op 21000 req/s 1007615 p50-ns 3549183 p99-ns 5808127 p99.9-ns 0.0000 non200/op 31000 server-cpu-ns/op
# top frames
80.00% 0.00% [.] runtime.goexit.abi0
# selected frames
40.10% 0.20% [.] github.com/valyala/fasthttp.(*Server).serveConnCounted
12.00% 0.30% [.] github.com/faucetgo/faucet/cmd/internal/httpserve.(*fastExchange).roundTrip

## deny (built-in 5 rps rule: nearly every request a 429)
# BenchmarkHTTP/target=faucet-fasthttp-deny/load=conns16 500000 390834 ns/op 47000 req/s 244735 p50-ns 3133439 p99-ns 5525503 p99.9-ns 0.9999 non200/op 15500 server-cpu-ns/op
# top frames
79.05% 0.00% [.] runtime.goexit.abi0
# selected frames
55.00% 0.10% [.] github.com/valyala/fasthttp.(*Server).serveConnCounted
`

// Profiles of serve on fasthttp stay out of the net/http comparison, even
// the newest of all, and the newest of them has a section of its own, one
// column per rule; without one there is no such section.
func TestFastProfileSection(t *testing.T) {
	dir := writeProfiles(t, map[string]string{
		"2026-11-29-2fb9a79-http-profile.txt": oldProfile,
		"2026-11-29-0aaaaaa-http-profile.txt": newProfile,
	})
	want, err := profileSection(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fastProfileSection(dir); got != "" || err != nil {
		t.Errorf("without a fasthttp profile: %q, %v; want nothing", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "2026-11-30-0bbbbbb-http-profile-fasthttp.txt"), []byte(fastProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := profileSection(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("the fasthttp profile changed the net/http comparison:\n%s\nwant\n%s", got, want)
	}
	fast, err := fastProfileSection(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"### " + fastProfileHeading + "\n",
		"[`bench/" + dir + "/2026-11-30-0bbbbbb-http-profile-fasthttp.txt`]",
		"| frame | allow | deny |\n|---|---|---|\n",
		"| requests/s while sampled | 21000 | 47000 |\n",
		"| CPU per request | 31.0 µs | 15.5 µs |\n",
		"| `github.com/valyala/fasthttp.(*Server).serveConnCounted` | 40.10 % | 55.00 % |\n",
		"| `cmd/internal/httpserve.(*fastExchange).roundTrip` | 12.00 % | — |\n",
	} {
		if !strings.Contains(fast, s) {
			t.Errorf("fasthttp section lacks %q:\n%s", s, fast)
		}
	}
	if strings.Contains(fast, "0aaaaaa") || strings.Contains(fast, "before") {
		t.Errorf("fasthttp section shows a net/http profile:\n%s", fast)
	}
}
