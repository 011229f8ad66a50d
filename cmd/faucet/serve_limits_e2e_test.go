package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// keepAlive opens a connection to addr, makes one request on it and leaves
// it open and idle, as a keep-alive client does between requests.
func keepAlive(t *testing.T, addr string, i int) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("connection %d: %v", i, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: faucet\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("request on connection %d: %v", i, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.SetDeadline(time.Time{})
	return c
}

// getFresh makes a request on a connection of its own, as a new client.
func getFresh(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("a new client: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// metric reads one sample from p's metrics, -1 if there is none.
func metric(t *testing.T, p *proc, sample string) float64 {
	t.Helper()
	_, body := get(t, p.adminURL("/metrics"))
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// Idle keep-alive connections at the cap do not lock a new client out: it
// takes the place of the one idle longest.
func TestServeIdleFloodDoesNotLockOut(t *testing.T) {
	p := startServe(t, "--max-conns", "50")
	for i := range 60 {
		keepAlive(t, p.addr, i)
	}
	if resp, body := getFresh(t, p.url("/healthz")); resp.StatusCode != 200 || body != "ok\n" {
		t.Errorf("a new client after 60 idle connections at --max-conns 50: %d %q", resp.StatusCode, body)
	}
	if n := metric(t, p, `faucet_connections_evicted_total{listener="public"}`); n != 11 {
		t.Errorf("evicted %v connections, want 11: the 10 over the cap, and one for the new client", n)
	}
}

// The default cap follows the process's open-file limit. Without it, 200
// idle connections against 128 descriptors used them all up, and every new
// connection then waited, unaccepted, for one to close.
func TestServeIdleFloodAtTheOpenFileLimit(t *testing.T) {
	p := startServeUnder(t, []string{"sh", "-c", `ulimit -n 128 && exec "$@"`, "sh"})
	for i := range 200 {
		keepAlive(t, p.addr, i)
	}
	if resp, body := getFresh(t, p.url("/healthz")); resp.StatusCode != 200 || body != "ok\n" {
		t.Errorf("a new client after 200 idle connections, 128 descriptors: %d %q", resp.StatusCode, body)
	}
}

// A client that sends its body slowly is cut at --read-timeout, and a proxy
// answers it 408: its own failure, not the upstream's.
func TestServeReadTimeoutCutsASlowBody(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer upstream.Close()
	for _, mode := range []struct {
		name string
		args []string
	}{{"check API", nil}, {"proxy", []string{"--upstream", upstream.URL}}} {
		t.Run(mode.name, func(t *testing.T) {
			p := startServe(t, append([]string{"--read-timeout", "1s", "--read-header-timeout", "1s"}, mode.args...)...)
			c, err := net.DialTimeout("tcp", p.addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			io.WriteString(c, "POST /v1/check HTTP/1.1\r\nHost: faucet\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
			stop := make(chan struct{})
			defer close(stop)
			go func() { // a byte every 100 ms: 1000 bytes would take 100 s
				for range 100 {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if isTimeout(err) {
				t.Fatalf("slow body not cut within %v at --read-timeout 1s", time.Since(start).Round(time.Millisecond))
			}
			if mode.name == "proxy" {
				if err != nil || resp.StatusCode != 408 || resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("proxy: %v %v, want 408 with a problem document", resp, err)
				}
				if n := metric(t, p, `faucet_upstream_errors_total{status="504"}`); n != 0 {
					t.Errorf("a slow client counted as %v upstream timeouts", n)
				}
			}
		})
	}
}

// problem decodes an RFC 9457 problem document and checks its form.
func problem(t *testing.T, resp *http.Response, body string, status int) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != status ||
		resp.Header.Get("Content-Type") != "application/problem+json" ||
		p["type"] != "about:blank" || p["title"] != http.StatusText(status) || p["status"] != float64(status) || p["detail"] == "" {
		t.Fatalf("got %d %s %q; want %d with an application/problem+json body", resp.StatusCode, resp.Header.Get("Content-Type"), body, status)
	}
	return p
}

// An upstream that accepts the request and does not answer gets 504 after
// --upstream-timeout, where it used to hold the client as long as it liked.
func TestServeUpstreamStallGives504(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(upstream.Close)
	t.Cleanup(func() { close(release) }) // first: Close waits for the handler
	p := startServe(t, "--upstream", upstream.URL, "--upstream-timeout", "500ms")
	resp, body := get(t, p.url("/slow"))
	prob := problem(t, resp, body, 504)
	if d := fmt.Sprint(prob["detail"]); strings.Contains(d, "127.0.0.1") || !strings.Contains(d, "500ms") {
		t.Errorf("detail %q, want the timeout and no address", d)
	}
	p.waitFor(t, regexp.MustCompile(`upstream failed.*status=504.*timeout awaiting response headers`))
	if n := metric(t, p, `faucet_upstream_errors_total{status="504"}`); n != 1 {
		t.Errorf("faucet_upstream_errors_total{status=\"504\"} %v, want 1", n)
	}
}

// An upstream that refuses connections gets 502 with a problem document,
// where it used to get an empty body; the address is logged, not told.
func TestServeUpstreamRefusedGives502(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	p := startServe(t, "--upstream", "http://"+dead)
	resp, body := get(t, p.url("/x"))
	if prob := problem(t, resp, body, 502); strings.Contains(fmt.Sprint(prob["detail"]), "127.0.0.1") {
		t.Errorf("detail %q names an address", prob["detail"])
	}
	p.waitFor(t, regexp.MustCompile(`upstream failed.*status=502.*`+regexp.QuoteMeta(dead)))
}

func TestServeHTTPFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--read-timeout", "0s"}, "--read-timeout: must be positive, got 0s"},
		{[]string{"--idle-timeout", "-1s"}, "--idle-timeout: must be positive, got -1s"},
		{[]string{"--read-header-timeout", "40s"}, "--read-header-timeout: must be at most --read-timeout (30s)"},
		{[]string{"--upstream-timeout", "5s"}, "--upstream-timeout: only means something with --upstream"},
		{[]string{"--upstream", "http://u", "--upstream-timeout", "60s"}, "--upstream-timeout: must be below --write-timeout (1m0s)"},
		{[]string{"--max-header-bytes", "100"}, "--max-header-bytes: must be from 1024 to 1048576, got 100"},
		{[]string{"--max-conns", "-1"}, "--max-conns: must be 0 (unbounded) or from 1 to"},
	} {
		code, _, errs := runArgs(append([]string{"serve", "--validate"}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.msg) {
			t.Errorf("faucet serve %q: exit %d, %q; want exit 2 and %q", tt.args, code, errs, tt.msg)
		}
	}
	if n, ok := openFileLimit(); ok {
		want := fmt.Sprintf("--max-conns: must be 0 (unbounded) or from 1 to %d, the open-file limit, got %d", n, n+1)
		if code, _, errs := runArgs("serve", "--validate", "--max-conns", fmt.Sprint(n+1)); code != 2 || !strings.Contains(errs, want) {
			t.Errorf("--max-conns above the limit: exit %d, %q; want %q", code, errs, want)
		}
	}
}
