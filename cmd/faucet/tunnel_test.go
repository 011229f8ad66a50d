package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestJudgeUpgrade(t *testing.T) {
	allowed := []string{"websocket"}
	for _, tt := range []struct {
		lines   []string
		allowed []string
		want    upgradeVerdict
	}{
		{[]string{"websocket"}, nil, upgradeRefused},
		{[]string{"websocket"}, allowed, upgradeAllowed},
		{[]string{"WebSocket"}, allowed, upgradeAllowed},
		{[]string{" websocket/13 "}, allowed, upgradeAllowed},
		{[]string{"websocket, foo"}, allowed, upgradeRefused},
		{[]string{"websocket", "foo"}, allowed, upgradeRefused},
		{[]string{"h2c"}, allowed, upgradeH2C},
		{[]string{"H2C"}, nil, upgradeH2C},
		{[]string{"websocket, h2c"}, allowed, upgradeH2C},
		{[]string{"foo", " h2c/1"}, nil, upgradeH2C},
		{[]string{""}, allowed, upgradeRefused},
		{[]string{","}, allowed, upgradeRefused},
		{[]string{"/"}, allowed, upgradeRefused},
		{nil, allowed, upgradeRefused},
	} {
		if got := judgeUpgrade(tt.lines, tt.allowed); got != tt.want {
			t.Errorf("judgeUpgrade(%q, %q) = %v, want %v", tt.lines, tt.allowed, got, tt.want)
		}
	}
}

func TestParseUpgradeList(t *testing.T) {
	for _, tt := range []struct {
		list, want, err string
	}{
		{"", "", ""},
		{" ", "", ""},
		{"websocket", "websocket", ""},
		{"WebSocket, foo", "websocket foo", ""},
		{"websocket,", "", "empty protocol name"},
		{"h2c", "", "h2c is never forwarded"},
		{"websocket/13", "", "not a protocol name"},
		{"web socket", "", "not a protocol name"},
	} {
		names, err := parseUpgradeList(tt.list)
		if got := strings.Join(names, " "); got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("parseUpgradeList(%q) = %q, %v; want %q, %q", tt.list, got, err, tt.want, tt.err)
		}
	}
}

func TestStripUpgrade(t *testing.T) {
	h := http.Header{
		"Connection":     {"Upgrade, HTTP2-Settings", "x-hop"},
		"Upgrade":        {"h2c"},
		"Http2-Settings": {"AAMAAABkAARAAAAAAAIAAAAA"},
		"X-Hop":          {"1"},
		"X-Api-Key":      {"k"},
	}
	stripUpgrade(h)
	if len(h) != 1 || h.Get("X-Api-Key") != "k" {
		t.Errorf("after stripUpgrade: %v, want X-Api-Key alone", h)
	}
}

func TestUpgradeFlagErrors(t *testing.T) {
	up := []string{"--upstream", "http://127.0.0.1:1"}
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--upgrade", "websocket"}, "--upgrade: only means something with --upstream"},
		{append(up, "--upgrade", "h2c"), "--upgrade: h2c is never forwarded"},
		{append(up, "--upgrade", "web socket"), `--upgrade: "web socket" is not a protocol name`},
		{append(up, "--upgrade", "websocket", "--upgrade-max-duration", "500ms"), "--upgrade-max-duration: must be from 1s to 24h0m0s, got 500ms"},
		{append(up, "--upgrade", "websocket", "--upgrade-max-duration", "25h"), "--upgrade-max-duration: must be from 1s to 24h0m0s, got 25h0m0s"},
		{append(up, "--upgrade", "websocket", "--upgrade-idle-timeout", "0s"), "--upgrade-idle-timeout: must be from 1s to --upgrade-max-duration (1h0m0s), got 0s"},
		{append(up, "--upgrade", "websocket", "--upgrade-max-duration", "10s"), "--upgrade-idle-timeout: must be from 1s to --upgrade-max-duration (10s), got 2m0s"},
		{append(up, "--upgrade", "websocket", "--upgrade-max-bytes", "1000"), "--upgrade-max-bytes: must be from 1024 to 1099511627776, got 1000"},
		{append(up, "--upgrade", "websocket", "--upgrade-max-bytes", "-1"), "--upgrade-max-bytes: must be from 1024 to 1099511627776, got -1"},
		{append(up, "--upgrade-max-bytes", "2048"), "--upgrade-max-bytes: only mean something with --upgrade"},
	} {
		code, _, errs := runArgs(append([]string{"serve", "--validate"}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.msg) {
			t.Errorf("faucet serve %q: exit %d, %q; want exit 2 and %q", tt.args, code, errs, tt.msg)
		}
	}
	code, _, errs := runArgs(append([]string{"serve", "--validate", "--upgrade", "WebSocket, foo", "--upgrade-max-bytes", "1024",
		"--upgrade-idle-timeout", "1s", "--upgrade-max-duration", "1s"}, up...)...)
	if code != 0 {
		t.Errorf("--upgrade with bounds at their least: exit %d, %q", code, errs)
	}
}

// An upstream that switches to h2c, asked or not, gets a 502: the request
// reached it without its offer to upgrade, so no tunnel opens.
func TestUnaskedSwitchIs502(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "h2c")
		w.WriteHeader(http.StatusSwitchingProtocols)
	}))
	defer upstream.Close()
	s := newTestServer(t, io.Discard, nil, "--upstream", upstream.URL)
	proxy := httptest.NewServer(s.public)
	defer proxy.Close()
	for _, h := range []string{"", "Connection: Upgrade\r\nUpgrade: h2c\r\n"} {
		c, err := net.Dial("tcp", proxy.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"+h+"Connection: close\r\n\r\n")
		out, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(out), "HTTP/1.1 502 ") {
			t.Errorf("a 101 to a request with %q: %.40q, want 502", h, out)
		}
	}
}

// fakeConn is an upstream connection that has much to read and takes
// every write.
type fakeConn struct{ closed bool }

func (c *fakeConn) Read(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (c *fakeConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *fakeConn) Close() error                { c.closed = true; return nil }

// The bytes of both ways count against --upgrade-max-bytes together, and
// not one more passes.
func TestTunnelMaxBytes(t *testing.T) {
	f := httpFlags{upgrade: "websocket", upgradeMaxDuration: time.Hour, upgradeIdleTimeout: time.Hour, upgradeMaxBytes: 1024}
	m := newMetrics()
	set := newTunnels(&f, m)
	up := &fakeConn{}
	tn := set.openTunnel(up, nil)
	buf := make([]byte, 4096)
	if n, err := tn.Write(buf[:1000]); n != 1000 || err != nil {
		t.Fatalf("Write(1000) = %d, %v", n, err)
	}
	if n, err := tn.Read(buf); n != 24 || err != nil {
		t.Fatalf("Read with 24 bytes left = %d, %v; want 24", n, err)
	}
	if n, err := tn.Write(buf[:1]); n != 0 || err == nil {
		t.Fatalf("Write past the bound = %d, %v; want 0 and an error", n, err)
	}
	if !up.closed {
		t.Error("the upstream connection is open after the bound")
	}
	if n, err := tn.Read(buf); n != 0 || err == nil {
		t.Errorf("Read after the bound = %d, %v; want 0 and an error", n, err)
	}
	tn.Close()
	if v := testutil.ToFloat64(m.tunnelsClosed.WithLabelValues("bytes")); v != 1 {
		t.Errorf("tunnels closed for bytes: %v, want 1", v)
	}
	if v := testutil.ToFloat64(m.tunnelsOpen); v != 0 {
		t.Errorf("tunnels open: %v, want 0", v)
	}
}

// A 101 opens a tunnel only for the protocol asked, compared as the proxy
// compares it (printable ASCII, ASCII case): any switch the proxy would
// refuse after modifyResponse is refused by it, which closes the upstream
// connection.
func TestModifyResponseProtocol(t *testing.T) {
	f := httpFlags{upgrade: "kproto", upgradeMaxDuration: time.Hour, upgradeIdleTimeout: time.Hour, upgradeMaxBytes: 1 << 20}
	set := newTunnels(&f, newMetrics())
	for _, c := range []struct {
		got  string
		open bool
	}{
		{"kproto", true}, {"KPROTO", true}, {"\u212aproto", false}, {"kproto2", false}, {"", false}, {"kpr\x7foto", false},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "kproto")
		req = req.WithContext(context.WithValue(req.Context(), tunnelKey{}, &tunnelGrant{}))
		res := &http.Response{StatusCode: http.StatusSwitchingProtocols, Request: req, Header: http.Header{},
			Body: &fakeConn{}}
		res.Header.Set("Connection", "Upgrade")
		res.Header.Set("Upgrade", c.got)
		err := set.modifyResponse(res)
		if (err == nil) != c.open {
			t.Errorf("a 101 to %q for kproto: error %v, want a tunnel %v", c.got, err, c.open)
		}
		if err == nil {
			res.Body.Close()
		}
	}
}
