package httpserve

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
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
	f := settings.HTTP{Upgrade: "websocket", UpgradeMaxDuration: time.Hour, UpgradeIdleTimeout: time.Hour, UpgradeMaxBytes: 1024}
	m := metrics.New()
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
	if v := testutil.ToFloat64(m.TunnelsClosed.WithLabelValues("bytes")); v != 1 {
		t.Errorf("tunnels closed for bytes: %v, want 1", v)
	}
	if v := testutil.ToFloat64(m.TunnelsOpen); v != 0 {
		t.Errorf("tunnels open: %v, want 0", v)
	}
}

// A 101 opens a tunnel only for the protocol asked, compared as the proxy
// compares it (printable ASCII, ASCII case): any switch the proxy would
// refuse after modifyResponse is refused by it, which closes the upstream
// connection.
func TestModifyResponseProtocol(t *testing.T) {
	f := settings.HTTP{Upgrade: "kproto", UpgradeMaxDuration: time.Hour, UpgradeIdleTimeout: time.Hour, UpgradeMaxBytes: 1 << 20}
	set := newTunnels(&f, metrics.New())
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
