package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The memory a flood of connections holds in serve, per connection and
// HTTP engine: silent ones (connected, nothing sent), ones in the middle of
// a header (busy: each holds what the server reads a header into), and
// idle ones after a request. Each engine's figures are logged; the
// bounds are generous. The figures bound what --max-conns of them can
// cost (docs/security.md).
func TestAttackMemoryPerConnection(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 200
	}
	shapes := []struct {
		name  string
		send  string
		bound int // KiB per connection
	}{
		{"silent", "", 32},
		// 48 KiB of a header under the default bound of 64 KiB.
		{"mid-header", "GET /v1/check HTTP/1.1\r\nHost: faucet\r\nX-Pad: " + strings.Repeat("a", 48<<10) + "\r\n", 160},
		{"idle", "GET /healthz HTTP/1.1\r\nHost: faucet\r\n\r\n", 48},
	}
	for _, engine := range []string{"nethttp", "fasthttp"} {
		for _, s := range shapes {
			p := startServe(t, "--http-engine", engine, "--max-conns", strconv.Itoa(2*n))
			pid := p.cmd.Process.Pid
			before := rssKiB(t, pid)
			conns := make([]net.Conn, 0, n)
			for range n {
				c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				if s.send != "" {
					c.SetDeadline(time.Now().Add(10 * time.Second))
					io.WriteString(c, s.send)
				}
			}
			if s.name == "idle" {
				for _, c := range conns {
					res, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						t.Fatalf("%s %s: %v", engine, s.name, err)
					}
					io.Copy(io.Discard, res.Body)
				}
			}
			time.Sleep(500 * time.Millisecond) // the server reads what was sent
			after := rssKiB(t, pid)
			per := float64(after-before) / float64(n)
			t.Logf("%s, %d %s connections: VmRSS %d KiB before, %d KiB after: %.1f KiB each", engine, n, s.name, before, after, per)
			if per > float64(s.bound) {
				t.Errorf("%s: %s connections hold %.1f KiB each, want at most %d", engine, s.name, per, s.bound)
			}
			for _, c := range conns {
				c.Close()
			}
			p.cmd.Process.Kill()
		}
	}
}
