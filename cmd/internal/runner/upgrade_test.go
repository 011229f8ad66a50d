package runner

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

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
