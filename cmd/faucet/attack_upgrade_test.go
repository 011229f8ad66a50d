package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tunnelUpstream answers 101 to every request that offers an upgrade, and
// 200 to every other request it reads on the connection, tunnelled or not,
// counting them all: what reaches it through a tunnel is counted too. To a
// request for /flood it sends without end.
type tunnelUpstream struct {
	ln   net.Listener
	hits atomic.Int64

	mu    sync.Mutex
	conns []net.Conn // closed at the end of the test; guarded by mu
}

func startTunnelUpstream(t *testing.T) *tunnelUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &tunnelUpstream{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, c := range u.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			go u.serve(c)
		}
	}()
	return u
}

func (u *tunnelUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		u.hits.Add(1)
		if req.URL.Path == "/flood" {
			for chunk := make([]byte, 64<<10); ; {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}
		if up := req.Header.Get("Upgrade"); up != "" {
			fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", up)
			continue
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
}

// upgradeRules: burst 2 per X-Client, refilling one token in 1000 s.
const upgradeRules = `{"rules":[{"name":"per-client","limit_keys":["header:x-client"],"algorithm_config":{"rps":0.001,"burst":2}}]}`

// upgradeConn is a client connection to faucet that asked to upgrade.
type upgradeConn struct {
	c      net.Conn
	br     *bufio.Reader
	client string
	status int // of the upgrade request
}

// dialUpgrade sends on a new connection to addr a request of client that
// offers to upgrade to proto, and reads the answer.
func dialUpgrade(t *testing.T, addr, client, proto string) *upgradeConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(8 * time.Second))
	req := "GET /up HTTP/1.1\r\nHost: faucet\r\nX-Client: " + client + "\r\n"
	if proto == "h2c" {
		req += "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
	} else {
		req += "Connection: Upgrade\r\nUpgrade: " + proto + "\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	}
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	u := &upgradeConn{c: c, br: bufio.NewReader(c), client: client}
	resp, err := http.ReadResponse(u.br, nil)
	if err != nil {
		t.Fatalf("upgrade to %s: %v", proto, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	u.status = resp.StatusCode
	return u
}

// send makes n requests on the connection, inside the tunnel if the upgrade
// was answered 101, each padded with pad bytes of header, one after the
// other; it returns how many were answered before the connection failed.
func (u *upgradeConn) send(n, pad int) (answered int, err error) {
	req := "GET /inside HTTP/1.1\r\nHost: faucet\r\nX-Client: " + u.client + "\r\nX-Pad: " + strings.Repeat("p", pad) + "\r\n\r\n"
	for range n {
		if _, err := io.WriteString(u.c, req); err != nil {
			return answered, err
		}
		resp, err := http.ReadResponse(u.br, nil)
		if err != nil {
			return answered, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered++
	}
	return answered, nil
}

// An upgrade turns a connection into a tunnel the limiter sees nothing of,
// in which any number of requests could reach the upstream behind a rule
// of burst 2: h2c is proxied as plain HTTP/1.1, another upgrade is refused
// unless --upgrade allows it, and an allowed one takes its tokens and is
// bounded in bytes, idle time and duration. CONNECT and the HTTP/2
// connection preface are refused.
func TestAttackUpgradeTunnels(t *testing.T) {
	up := startTunnelUpstream(t)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, upgradeRules)
	upstream := "http://" + up.ln.Addr().String()

	p := startServe(t, "--rules", rules, "--upstream", upstream)
	for i, proto := range []string{"h2c", "websocket", "WebSocket"} {
		before := up.hits.Load()
		u := dialUpgrade(t, p.addr, fmt.Sprintf("c%d", i), proto)
		answered, err := u.send(50, 0)
		reached := up.hits.Load() - before
		t.Logf("%s: upgrade answered %d, then %d of 50 requests answered (%v); %d reached the upstream", proto, u.status, answered, err, reached)
		if reached > 2 {
			t.Errorf("%s: %d requests reached the upstream behind a rule of burst 2", proto, reached)
		}
		want := http.StatusForbidden
		if proto == "h2c" {
			want = http.StatusOK // proxied without the upgrade
		}
		if u.status != want {
			t.Errorf("%s: the upgrade request got %d, want %d", proto, u.status, want)
		}
	}
	if n := metric(t, p, `faucet_upgrades_total{result="h2c_downgraded"}`); n != 1 {
		t.Errorf("faucet_upgrades_total{result=\"h2c_downgraded\"} = %v, want 1", n)
	}
	if n := metric(t, p, `faucet_upgrades_total{result="refused"}`); n != 2 {
		t.Errorf("faucet_upgrades_total{result=\"refused\"} = %v, want 2", n)
	}

	// CONNECT, and h2c with prior knowledge: the HTTP/2 connection preface.
	// The preface's target, *, has no canonical path: the limiter refuses
	// it with 400 before the upgrade gate sees the method.
	for _, tt := range []struct {
		name, req string
		status    int
	}{
		{"CONNECT", "CONNECT upstream.example:443 HTTP/1.1\r\nHost: upstream.example:443\r\nX-Client: connect\r\n\r\n", http.StatusMethodNotAllowed},
		{"the HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", http.StatusBadRequest},
	} {
		before := up.hits.Load()
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(8 * time.Second))
		io.WriteString(c, tt.req)
		method, _, _ := strings.Cut(tt.req, " ")
		if resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method}); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		} else if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %q, want %d application/problem+json", tt.name, resp.StatusCode, resp.Header.Get("Content-Type"), tt.status)
		}
		if n := up.hits.Load() - before; n != 0 {
			t.Errorf("%s: %d requests reached the upstream", tt.name, n)
		}
	}

	// --upgrade websocket: the tunnel opens, and ends at each bound. The
	// idle bound is wide of the busy tunnel's 100 ms sends, which a loaded
	// machine may delay, and the duration bound above it, so that each
	// bound ends its own tunnel.
	const maxBytes, pad = 4096, 300
	p = startServe(t, "--rules", rules, "--upstream", upstream, "--upgrade", "websocket",
		"--upgrade-max-bytes", fmt.Sprint(maxBytes), "--upgrade-idle-timeout", "3s", "--upgrade-max-duration", "4s")

	before := up.hits.Load()
	u := dialUpgrade(t, p.addr, "bytes", "WebSocket")
	answered, err := u.send(50, pad)
	reached := up.hits.Load() - before
	t.Logf("--upgrade-max-bytes %d: %d of 50 requests of %d bytes answered in the tunnel (%v); %d reached the upstream", maxBytes, answered, pad+50, err, reached)
	if u.status != http.StatusSwitchingProtocols {
		t.Fatalf("an allowed upgrade got %d, want 101", u.status)
	}
	if err == nil || reached > 1+maxBytes/pad {
		t.Errorf("--upgrade-max-bytes %d: %d requests of %d bytes reached the upstream, the tunnel still open: %v", maxBytes, reached, pad, err)
	}

	u = dialUpgrade(t, p.addr, "duration", "websocket")
	if n := waitMetric(t, p, `faucet_connections_open{listener="public"}`, 1); n != 1 {
		t.Errorf("faucet_connections_open with a tunnel open = %v, want 1: a tunnel holds its --max-conns slot", n)
	}
	start := time.Now()
	// An idle tunnel alongside the busy one, so the two bounds run at once.
	idle := dialUpgrade(t, p.addr, "idle", "websocket")
	if _, err := idle.send(1, 0); err != nil {
		t.Fatalf("a request in the tunnel: %v", err)
	}
	idleEnded := make(chan error, 1)
	go func() {
		start := time.Now()
		if _, err := idle.br.ReadByte(); err == nil || isTimeout(err) {
			idleEnded <- fmt.Errorf("a tunnel idle past --upgrade-idle-timeout 3s: %v after %v, want it closed", err, time.Since(start))
		}
		close(idleEnded)
	}()
	for time.Since(start) < 8*time.Second {
		if _, err = u.send(1, 0); err != nil {
			break
		}
		// Well within --upgrade-idle-timeout, and few enough bytes for
		// --upgrade-max-bytes.
		time.Sleep(500 * time.Millisecond)
	}
	if err == nil || isTimeout(err) {
		t.Errorf("a busy tunnel past --upgrade-max-duration 4s: %v after %v, want it closed", err, time.Since(start))
	}
	if err := <-idleEnded; err != nil {
		t.Error(err)
	}

	for _, reason := range []string{"bytes", "idle", "duration"} {
		if n := metric(t, p, `faucet_tunnels_closed_total{reason="`+reason+`"}`); n != 1 {
			t.Errorf("faucet_tunnels_closed_total{reason=%q} = %v, want 1", reason, n)
		}
	}
	if n := waitMetric(t, p, `faucet_connections_open{listener="public"}`, 0); n != 0 {
		t.Errorf("faucet_connections_open after every tunnel ended = %v, want 0", n)
	}
	if n := metric(t, p, `faucet_tunnels_open`); n != 0 {
		t.Errorf("faucet_tunnels_open after every tunnel ended = %v, want 0", n)
	}

	// A client that reads nothing while the upstream sends: once every
	// buffer between them is full, the proxy waits on the client, and the
	// idle bound must reach it there to free the client's slot.
	p = startServe(t, "--rules", rules, "--upstream", upstream, "--upgrade", "websocket", "--upgrade-idle-timeout", "1s")
	u = dialUpgrade(t, p.addr, "flood", "websocket")
	io.WriteString(u.c, "GET /flood HTTP/1.1\r\nHost: faucet\r\n\r\n")
	if n := waitMetric(t, p, `faucet_tunnels_closed_total{reason="idle"}`, 1); n != 1 {
		t.Errorf("a tunnel to a client that reads nothing: faucet_tunnels_closed_total{reason=\"idle\"} = %v, want 1", n)
	}
	if n := waitMetric(t, p, `faucet_connections_open{listener="public"}`, 0); n != 0 {
		t.Errorf("a tunnel to a client that reads nothing still holds its --max-conns slot after the idle bound: %v open", n)
	}
}

// waitMetric waits up to 5 s for a sample of p's metrics to read want, and
// returns what it read last.
func waitMetric(t *testing.T, p *proc, sample string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := metric(t, p, sample)
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}
