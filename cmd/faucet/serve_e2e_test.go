package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logtest"
)

// The end-to-end tests build the faucet binary once and run it as a separate
// process on a loopback port, in front of a test upstream.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func faucetBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		// FAUCET_BIN replays the tests against another build, such as
		// one from before a fix, to see a test fail there.
		if bin := os.Getenv("FAUCET_BIN"); bin != "" {
			binPath = bin
			return
		}
		dir, err := os.MkdirTemp("", "faucet-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "faucet")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a running faucet serve.
type proc struct {
	cmd   *exec.Cmd
	addr  string        // public listener
	admin string        // admin listener, if any
	done  chan error    // its exit status, once
	ended chan struct{} // closed when it has exited and every line is read

	mu     sync.Mutex
	lines  []string      // its log; guarded by mu
	read   int           // lines[:read] were seen by waitFor; guarded by mu
	logged chan struct{} // a line was added (capacity 1)
}

// The addresses in the "listening" line, in text or JSON.
var (
	listening = regexp.MustCompile(`msg"?[=:]"?listening\b`)
	publicURL = regexp.MustCompile(`\burl"?[=:]"?http://([^\s"]+)`)
	adminURL  = regexp.MustCompile(`\badmin_url"?[=:]"?http://([^\s"]+)`)
)

// submatch is re's first submatch in s, or "".
func submatch(re *regexp.Regexp, s string) string {
	if m := re.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// testEngine is the HTTP engine of the public listener the tests run serve
// with: FAUCET_TEST_HTTP_ENGINE, or serve's default.
func testEngine() string {
	if e := os.Getenv("FAUCET_TEST_HTTP_ENGINE"); e != "" {
		return e
	}
	return "nethttp"
}

// startServe runs faucet serve with args, both listeners on free loopback
// ports unless args say otherwise, and waits until it listens.
func startServe(t testing.TB, args ...string) *proc {
	t.Helper()
	return startServeUnder(t, nil, args...)
}

// startServeUnder is startServe with the command run by wrapper (such as
// a shell that lowers a limit first), if not nil.
func startServeUnder(t testing.TB, wrapper []string, args ...string) *proc {
	t.Helper()
	argv := append(wrapper, faucetBinary(t), "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	if e := testEngine(); e != "nethttp" && !slices.Contains(args, "--http-engine") {
		argv = append(argv, "--http-engine", e)
	}
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1), ended: make(chan struct{}), logged: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.logged <- struct{}{}:
			default:
			}
		}
		p.done <- cmd.Wait()
		close(p.ended)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("faucet serve log:\n%s", p.log())
		}
	})
	line := p.waitFor(t, listening)[0]
	p.addr, p.admin = submatch(publicURL, line), submatch(adminURL, line)
	return p
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitFor waits for a log line matching re, after those it has seen
// already, and returns its submatches, the whole line first.
func (p *proc) waitFor(t testing.TB, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		for p.read < len(p.lines) {
			line := p.lines[p.read]
			p.read++
			if m := re.FindStringSubmatch(line); m != nil {
				p.mu.Unlock()
				return append([]string{line}, m[1:]...)
			}
		}
		p.mu.Unlock()
		select {
		case <-p.logged:
		case <-p.ended:
			p.mu.Lock()
			unread := p.read < len(p.lines)
			p.mu.Unlock()
			if !unread {
				t.Fatalf("faucet serve exited without a log line matching %q", re)
			}
		case <-deadline:
			t.Fatalf("no log line matching %q in 30 s", re)
		}
	}
}

func (p *proc) url(path string) string { return "http://" + p.addr + path }

func (p *proc) adminURL(path string) string { return "http://" + p.admin + path }

// testClient bounds every request of the tests, a server that hangs included.
var testClient = &http.Client{Timeout: 30 * time.Second}

func get(t *testing.T, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	resp, err := testClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func writeRules(t testing.TB, path, doc string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

const e2eRules = `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
  "algorithm_config":{"rps":0.01,"burst":5}}]}`

func TestServeProxyEndToEnd(t *testing.T) {
	var upstreamHits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamHits.Add(1)
		fmt.Fprintf(w, "upstream %s xff=%s", r.URL.Path, r.Header.Get("X-Forwarded-For"))
	}))
	defer upstream.Close()
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, e2eRules)
	p := startServe(t, "--rules", rules, "--upstream", upstream.URL, "--watch", "50ms", "--headers", "draft,legacy")

	resp, body := get(t, p.url("/healthz"))
	if resp.StatusCode != 200 || body != "ok\n" || resp.Header.Get("RateLimit") != "" || upstreamHits.Load() != 0 {
		t.Fatalf("/healthz: %d %q RateLimit=%q upstream hits %d", resp.StatusCode, body, resp.Header.Get("RateLimit"), upstreamHits.Load())
	}
	var drained time.Time // when the 5th request took the last token
	for i := range 5 {
		// A spoofed X-Forwarded-For changes nothing: no proxy is trusted,
		// so neither the limiter nor the upstream sees it.
		drained = time.Now()
		resp, body := get(t, p.url("/items"), "X-Forwarded-For", fmt.Sprintf("10.0.0.%d", i))
		rOK := resp.Header.Get("RateLimit") == fmt.Sprintf(`"per-ip";r=%d;t=0`, 4-i)
		if i == 4 {
			rOK = drainedOK(resp.Header.Get("RateLimit"), "", drained)
		}
		if resp.StatusCode != 200 || body != "upstream /items xff=127.0.0.1" ||
			!rOK || resp.Header.Get("RateLimit-Policy") != `"per-ip";q=5;w=500` ||
			resp.Header.Get("RateLimit-Limit") != "5" {
			t.Fatalf("request %d: %d %q RateLimit=%q Policy=%q Limit=%q", i, resp.StatusCode, body,
				resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit-Limit"))
		}
	}
	resp, body = get(t, p.url("/items"))
	var prob map[string]any
	json.Unmarshal([]byte(body), &prob)
	ra := resp.Header.Get("Retry-After")
	if resp.StatusCode != 429 || resp.Header.Get("Content-Type") != "application/problem+json" ||
		resp.Header.Get("X-Faucet-Reason") != "token_bucket_exceeded" || !drainedOK(resp.Header.Get("RateLimit"), "", drained) ||
		prob["status"] != 429.0 || fmt.Sprint(prob["violated-policies"]) != "[per-ip]" {
		t.Fatalf("6th request: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	var n int
	if _, err := fmt.Sscan(ra, &n); err != nil || n < drainedWait(drained) || n > 150 {
		t.Errorf("Retry-After %q, want the wait for a token (at most 100 s) plus at most 50 %%", ra)
	}
	if upstreamHits.Load() != 5 {
		t.Errorf("upstream saw %d requests, want the 5 allowed", upstreamHits.Load())
	}
	_, metrics := get(t, p.adminURL("/metrics"))
	for _, want := range []string{`faucet_decisions_total{result="allowed",rule="per-ip"} 5`,
		`faucet_decisions_total{result="denied",rule="per-ip"} 1`, `faucet_live_keys{rule="per-ip"} 1`, `go_goroutines`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A file change reloads; the unchanged rule keeps its drained bucket.
	writeRules(t, rules, strings.Replace(e2eRules, `}]}`, `},
	  {"name":"per-path","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":100}}]}`, 1))
	p.waitFor(t, regexp.MustCompile(`reloaded rules.* rules=2`))
	resp, _ = get(t, p.url("/items"))
	if resp.StatusCode != 429 || !drainedOK(resp.Header.Get("RateLimit"), `, "per-path";r=100;t=0`, drained) {
		t.Errorf("after reload: %d RateLimit=%q, want the kept, drained per-ip bucket", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	// A bad file is reported and the rules in force stay.
	writeRules(t, rules, `{"rules":[{"name":"x","limit_keys":["ip:address"],"algorithm_config":{"rps":10,"burst":1}}]}`)
	p.waitFor(t, regexp.MustCompile(`reload failed, keeping the rules in force.*burst: must be at least the rate`))
	resp, _ = get(t, p.url("/items"))
	if !strings.Contains(resp.Header.Get("RateLimit"), "per-path") {
		t.Errorf("after a bad reload: RateLimit=%q, want the previous rules", resp.Header.Get("RateLimit"))
	}
	// SIGHUP reloads too.
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitFor(t, regexp.MustCompile(`reload failed`))
	writeRules(t, rules, e2eRules)
	p.waitFor(t, regexp.MustCompile(`reloaded rules.* rules=1`))
	_, metrics = get(t, p.adminURL("/metrics"))
	if !strings.Contains(metrics, `faucet_rules_reloads_total{result="error"} 2`) || !strings.Contains(metrics, `faucet_rules_reloads_total{result="success"} 2`) {
		t.Errorf("reload metrics:\n%s", logtest.Grep(metrics, "reloads"))
	}

	// Graceful shutdown: a request in flight completes, then exit 0. The
	// upstream holds the request until the shutdown has begun, so that it
	// is in flight then however slowly this machine runs.
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
		io.WriteString(w, "slow")
	}))
	defer slow.Close()
	q := startServe(t, "--upstream", slow.URL)
	result := make(chan string, 1)
	go func() {
		resp, err := testClient.Get(q.url("/"))
		if err != nil {
			result <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- string(b)
	}()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the request did not reach the upstream in 30 s")
	}
	q.cmd.Process.Signal(syscall.SIGTERM)
	q.waitFor(t, regexp.MustCompile(`shutting down`))
	close(release)
	if got := <-result; got != "slow" {
		t.Errorf("request in flight at SIGTERM got %q, want it completed", got)
	}
	select {
	case err := <-q.done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("no exit 10 s after SIGTERM")
	}
}

// drainedWait is the least wait, in whole seconds, that the per-ip bucket
// of e2eRules, drained at drained, may show now: a token takes 100 s, and
// the wait counts down as time passes, however slowly the test runs.
func drainedWait(drained time.Time) int {
	return 100 - int(math.Ceil(time.Since(drained).Seconds()))
}

// drainedOK reports whether a RateLimit field shows that bucket, with no
// token and a wait from drainedWait to 100 s, followed by rest.
func drainedOK(field, rest string, drained time.Time) bool {
	m := regexp.MustCompile(`^"per-ip";r=0;t=(\d+)(.*)$`).FindStringSubmatch(field)
	if m == nil || m[2] != rest {
		return false
	}
	w, _ := strconv.Atoi(m[1])
	return w >= drainedWait(drained) && w <= 100
}

// Without --upstream: the check API, and the built-in rule (5 rps, burst
// 10). The bucket refills a token every 200 ms while the checks run, so the
// count admitted before the first denial is bounded by the time they took
// rather than assumed to be exactly the burst.
func TestServeCheckAPIEndToEnd(t *testing.T) {
	p := startServe(t)
	post := func(body string) (int, map[string]any) {
		resp, err := testClient.Post(p.url("/v1/check"), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	start := time.Now()
	admitted := 0
	var code int
	var out map[string]any
	for range 1000 {
		if code, out = post(`{"ip":"198.51.100.1","path":"/x"}`); code != 200 || out["allowed"] != true {
			break
		}
		admitted++
	}
	most := 10 + int(5*time.Since(start).Seconds()) + 1
	if admitted < 10 || admitted > most {
		t.Errorf("admitted %d before the first denial, want the burst of 10 plus at most the refill, %d in all", admitted, most)
	}
	h, _ := out["headers"].(map[string]any)
	if code != 200 || out["allowed"] != false || out["status"] != 429.0 || h["RateLimit-Policy"] != `"per-ip";q=10;w=2` ||
		h["RateLimit"] != `"per-ip";r=0;t=1` || h["Retry-After"] != "1" {
		t.Errorf("first denied check: %d %v", code, out)
	}
	if code, _ := post(`{"ip":"not an ip"}`); code != 400 {
		t.Errorf("bad check: %d, want 400", code)
	}
	if resp, _ := get(t, p.url("/elsewhere")); resp.StatusCode != 404 {
		t.Errorf("GET /elsewhere without upstream: %d, want 404", resp.StatusCode)
	}
}

// A bad rules file: exit status 2 and every problem listed; --validate
// checks without serving.
func TestServeBadRulesExit2(t *testing.T) {
	bin := faucetBinary(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"rules":[
	  {"name":"a","limit_keys":["ip:adress"],"algorithm_config":{"rps":10,"burst":5}},
	  {"name":"a","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":1,"cost":2}}]}`), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--rules", bad, "--listen", "127.0.0.1:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2; output:\n%s", err, out)
	}
	for _, want := range []string{`unknown limit key "ip:adress"`, `burst: must be at least the rate (10), got 5`,
		`algorithm_config.cost: unknown field`, `name: duplicate name: rules[0] has it too`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.CommandContext(ctx, bin, "serve", "--rules", filepath.Join(dir, "missing.json"), "--upstream", "ftp://x", "--headers", "ietf").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "missing.json") ||
		!strings.Contains(string(out), "--upstream") || !strings.Contains(string(out), "--headers") {
		t.Errorf("bad flags: %v\n%s", err, out)
	}
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(e2eRules), 0o644)
	out, err = exec.CommandContext(ctx, bin, "serve", "--rules", good, "--validate").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 rules, valid") {
		t.Errorf("--validate: %v %s", err, out)
	}
}

// The example rules file of docs/rules.md is valid, and means what it says.
func TestExampleRules(t *testing.T) {
	t.Setenv(jwtSecretEnv, "an HS256 secret of at least 32 bytes, for tests") // its claims need verifying
	code, out, errs := runArgs("serve", "--rules", "rules.example.json", "--validate")
	if code != 0 || out != "rules.example.json: 4 rules, valid\n" {
		t.Errorf("exit %d: %q %q", code, out, errs)
	}
	file, err := os.ReadFile("rules.example.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, append([]byte("```json\n"), file...)) {
		t.Error("docs/rules.md does not show rules.example.json as it is")
	}
}

// Metrics are on the admin listener only: scraping them must not compete
// with clients, nor be open to them. On the public listener /metrics is a
// path like any other: 404 for the check API, the upstream's with a proxy.
func TestServeMetricsOnlyOnAdmin(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream %s", r.URL.Path)
	}))
	defer upstream.Close()
	check := startServe(t, "--log-format", "json")
	if resp, body := get(t, check.url("/metrics")); resp.StatusCode != 404 || strings.Contains(body, "faucet_") {
		t.Errorf("public /metrics, check API: %d %.60q, want 404", resp.StatusCode, body)
	}
	if resp, body := get(t, check.adminURL("/metrics")); resp.StatusCode != 200 || !strings.Contains(body, "faucet_store_errors_total 0") {
		t.Errorf("admin /metrics: %d %.60q, want the metrics", resp.StatusCode, body)
	}
	if resp, body := get(t, check.adminURL("/healthz")); resp.StatusCode != 200 || body != "ok\n" {
		t.Errorf("admin /healthz: %d %q", resp.StatusCode, body)
	}
	for _, l := range strings.Split(check.log(), "\n") {
		if !json.Valid([]byte(l)) {
			t.Errorf("--log-format json wrote %q", l)
		}
	}
	proxy := startServe(t, "--upstream", upstream.URL, "--admin-listen", "")
	if resp, body := get(t, proxy.url("/metrics")); resp.StatusCode != 200 || body != "upstream /metrics" {
		t.Errorf("public /metrics, proxy: %d %.60q, want the upstream's answer", resp.StatusCode, body)
	}
	if proxy.admin != "" {
		t.Errorf("--admin-listen \"\" listens on %s", proxy.admin)
	}
}

// The admin listener's default port is faucet's own, not Prometheus
// server's 9090, and the listening line says where the metrics are.
func TestServeAdminDefaultAndMetricsURL(t *testing.T) {
	if defaultAdminListen != "127.0.0.1:8078" {
		t.Errorf("default --admin-listen %q, want 127.0.0.1:8078", defaultAdminListen)
	}
	p := startServe(t, "--metrics-path", "/m")
	url := submatch(regexp.MustCompile(`\bmetrics_url"?[=:]"?(http://[^\s"]+)`), p.log())
	if url != p.adminURL("/m") {
		t.Fatalf("metrics_url %q in the listening line, want %q:\n%s", url, p.adminURL("/m"), p.log())
	}
	if resp, body := get(t, url); resp.StatusCode != http.StatusOK || !strings.Contains(body, "faucet_decisions_total") {
		t.Errorf("GET %s: %d %.80q, want the metrics", url, resp.StatusCode, body)
	}
}

// checkOut is what the tests read of a check API answer.
type checkOut struct {
	Allowed bool   `json:"allowed"`
	Status  int    `json:"status"`
	Reason  string `json:"reason"`
	Detail  string `json:"detail"`
}

// postCheck posts body to p's check API and returns the HTTP status and
// the decoded answer.
func postCheck(t *testing.T, p *proc, body string) (int, checkOut) {
	t.Helper()
	resp, err := testClient.Post(p.url("/v1/check"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out checkOut
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
