package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawGet sends GET target on a connection of its own, byte for byte as
// given (Go's client would clean the path first), and returns the status.
func rawGet(t *testing.T, addr, target string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: faucet\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// pathRecorder is an upstream that records the request targets it gets.
type pathRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (p *pathRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen = append(p.seen, r.RequestURI)
	p.mu.Unlock()
}

func (p *pathRecorder) paths() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// Spellings of one path that a server resolving dot segments, merging
// slashes and decoding escapes reads as /api/x, each of which a limiter
// matching the raw path would give a bucket of its own, or none: every one
// is limited as /api/x, or refused, and the upstream only ever gets /api/x.
func TestAttackNonCanonicalPaths(t *testing.T) {
	rec := &pathRecorder{}
	up := httptest.NewServer(rec)
	defer up.Close()
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.json")
	writeRules(t, rules, `{"rules":[
	  {"name":"api","limit_keys":["ip:address"],"match":{"path_prefix":["/api/"]},"algorithm_config":{"rps":0.001,"burst":3}},
	  {"name":"items","limit_keys":["path"],"match":{"method":["POST"]},"algorithm_config":{"rps":0.001,"burst":1}}]}`)
	p := startServe(t, "--rules", rules, "--upstream", up.URL)

	spellings := []string{"/api/x", "//api/x", "/./api/x", "/x/../api/x", "/%2e/api/x", "/%2E%2E/api/x", "///api/x",
		"/api/../api/x", "/.//api/x", "/z/%2e%2e/api/x", "/%2fapi/x", "/%61pi/x", "/api//x", "/api/./x", `/\api/x`, "/;/api/x",
		"http://faucet/%2e/api/x", "*", "/api%2Fx|", "/a/..%2F..%2Fapi|/x", "http://faucet/api%2Fx{", "/api%2Fx%C3%A9|"}
	codes := map[int]int{}
	for _, s := range spellings {
		codes[rawGet(t, p.addr, s)]++
	}
	t.Logf("%d spellings of /api/x: statuses %v; the upstream got %q", len(spellings), codes, rec.paths())
	if codes[200] > 3 {
		t.Errorf("%d of %d spellings of /api/x admitted, want at most 3 (the burst)", codes[200], len(spellings))
	}
	if codes[200]+codes[429]+codes[400] != len(spellings) {
		t.Errorf("statuses %v, want only 200, 429 and 400", codes)
	}
	for _, got := range rec.paths() {
		if got != "/api/x" {
			t.Errorf("the upstream got %q, want only /api/x", got)
		}
	}
	invalid := codes[400]
	if testEngine() == "fasthttp" {
		// fasthttp refuses the target * itself, before the limiter sees it.
		invalid--
	}
	if n := metric(t, p, "faucet_invalid_paths_total"); n != float64(invalid) {
		t.Errorf("faucet_invalid_paths_total %v, want %d (the 400s the limiter gave)", n, invalid)
	}

	// A rule keyed on the path: one bucket for every spelling.
	items := []string{"/items", "//items", "/./items", "/%69tems", "/x/../items", "/%2e/items"}
	admitted := 0
	for _, s := range items {
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: faucet\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", s)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatalf("POST %s: %v", s, err)
		}
		if resp.StatusCode == http.StatusOK {
			admitted++
		}
	}
	t.Logf("%d spellings of /items under a path key of burst 1: %d admitted", len(items), admitted)
	if admitted != 1 {
		t.Errorf("%d of %d spellings of /items admitted, want 1", admitted, len(items))
	}
}

// The path flags: what the rules read is what the upstream gets.
func TestServePathFlags(t *testing.T) {
	rec := &pathRecorder{}
	up := httptest.NewServer(rec)
	defer up.Close()
	p := startServe(t, "--upstream", up.URL, "--path-fold-case", "--path-trim-trailing-slash",
		"--path-keep-encoded-slashes", "--path-allow-semicolons")
	for _, s := range []string{"/API/X/", "/a%2fb;c", `/a\b`} {
		if code := rawGet(t, p.addr, s); code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", s, code)
		}
	}
	want := []string{"/api/x", "/a%2Fb;c", "/a%5Cb"}
	if got := rec.paths(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the upstream got %q, want %q", got, want)
	}
}

// A path with its query ("/login?a=1", the request target as received),
// read as a path holding an escaped "?", would pass a rule on the exact
// path /login (burst 1) every time: the check API refuses a "?" or "#" in
// the path, 400 naming the field.
func TestAttackCheckPathWithQuery(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"login","limit_keys":["ip:address"],"match":{"path":"/login"},"algorithm_config":{"rps":0.001,"burst":1}}]}`)
	p := startServe(t, "--rules", rules)
	allowed := 0
	for i, path := range []string{"/login?a=1", "/login?", "/login#", "/login?a=2", "/login#x?"} {
		code, out := postCheck(t, p, fmt.Sprintf(`{"ip":"203.0.113.7","path":%q}`, path))
		if out.Allowed {
			allowed++
		} else if code != 400 || !strings.Contains(out.Detail, "path") {
			t.Errorf("check %d %q: %d %+v, want 400 naming the path", i, path, code, out)
		}
	}
	t.Logf("5 checks of /login with a query or fragment in the path: %d allowed", allowed)
	if allowed != 0 {
		t.Errorf("%d of 5 checks allowed under a rule of burst 1 on /login, want none (refused)", allowed)
	}
}
