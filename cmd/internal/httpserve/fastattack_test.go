package httpserve

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
)

// keyedFronts serves Public on net/http and PublicFast on fasthttp, each
// with its own limiter of one rule keyed on X-Api-Key (a burst of one,
// and no refill within a test), in front of one upstream that records the
// X-Api-Key values it was served with. It returns the fronts' addresses
// and a function that returns, and forgets, what the upstream saw.
func keyedFronts(t *testing.T) (fronts map[string]string, seen func() [][]string) {
	t.Helper()
	var mu sync.Mutex
	var got [][]string
	fronts = frontsOf(t, func(r *http.Request) {
		mu.Lock()
		got = append(got, r.Header["X-Api-Key"])
		mu.Unlock()
	})
	return fronts, func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		g := got
		got = nil
		return g
	}
}

// frontsOf is keyedFronts with an upstream that calls record with each
// request it serves.
func frontsOf(t *testing.T, record func(*http.Request)) map[string]string {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { record(r) }))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	f := &settings.HTTP{UpstreamTimeout: 5 * time.Second, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	limiter := func() *httplimit.Middleware {
		lim, err := httplimit.New([]httplimit.Rule{{Name: "per-key", LimitKeys: []string{"header:x-api-key"}, Rate: 0.001, Burst: 1}}, httplimit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lim.Close() })
		return lim
	}
	logs := logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute)
	h, closeNet := Public(limiter(), u, f, metrics.New(), logs)
	ns := httptest.NewServer(h)
	t.Cleanup(func() { ns.Close(); closeNet() })
	fh, closeFast := PublicFast(limiter(), u, f, metrics.New(), logs)
	l, err := ListenFast("public", "127.0.0.1:0", fh, f, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	t.Cleanup(func() { l.Shutdown(t.Context()); closeFast() })
	return map[string]string{"net/http": ns.Listener.Addr().String(), "fasthttp": l.Ln.Addr().String()}
}

// TestAttackTargetAndHostAsOnNetHTTP: through the limiter and the proxy,
// requests whose target the limiter rewrites to its canonical form, or
// whose host an absolute target names, get the same status on both
// engines, and the upstream the same target and forwarded host.
func TestAttackTargetAndHostAsOnNetHTTP(t *testing.T) {
	var mu sync.Mutex
	var got []string
	fronts := frontsOf(t, func(r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.RequestURI+" xfh="+r.Header.Get("X-Forwarded-Host")+" key="+strings.Join(r.Header["X-Api-Key"], "|"))
		mu.Unlock()
	})
	for i, raw := range []string{
		"GET /a/../b HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a/./b//c HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /%2e%2e/x HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /x%2Fy/%7e?q=%41&q=b HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET http://b.example/abs/../p?x HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET http://B.Example:80 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /x HTTP/1.0\r\n\r\n",
		"GET /%C3%A9/\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /k HTTP/1.1\r\nHost: a\r\nx-api-key: K%d\r\n\r\n",
		"GET /k HTTP/1.1\r\nHost: a\r\nX-Api-Key: K%d\r\nX-API-KEY: L\r\n\r\n",
		"GET /k HTTP/1.1\r\nHost: a\r\nX-Api-Key: K%d\r\nX-Api_Key: L\r\n\r\n",
	} {
		if strings.Contains(raw, "%d") {
			raw = fmt.Sprintf(raw, i)
		}
		var answers [2]string
		for j, engine := range []string{"net/http", "fasthttp"} {
			s := statusOf(t, fronts[engine], raw)
			mu.Lock()
			answers[j] = fmt.Sprintf("%d %q", s, got)
			got = nil
			mu.Unlock()
		}
		if answers[0] != answers[1] {
			t.Errorf("%q:\n net/http %s\n fasthttp %s", raw, answers[0], answers[1])
		}
	}
}

// TestAttackConnectionSentTwice: a field named in Connection is dropped
// by the proxy, so a rule keyed on it is refused (400): the upstream would
// serve the request without the value the limiter counted. Naming it in
// the first of two Connection lines must not hide that from the limiter,
// or each request counts under a fresh key and is served as one without.
func TestAttackConnectionSentTwice(t *testing.T) {
	fronts, seen := keyedFronts(t)
	for engine, addr := range fronts {
		for i, conn := range []string{
			"Connection: X-Api-Key, keep-alive\r\n",
			"Connection: X-Api-Key\r\nConnection: keep-alive\r\n",
			"Connection: keep-alive\r\nconnection: x-api-key\r\n",
			"Connection: X-Api-Key\r\nConnection: close\r\n",
		} {
			raw := fmt.Sprintf("GET /x HTTP/1.1\r\nHost: a\r\nX-Api-Key: k%d\r\n%s\r\n", i, conn)
			if s := statusOf(t, addr, raw); s != http.StatusBadRequest {
				t.Errorf("%s: %q: status %d, want 400", engine, conn, s)
			}
		}
		if got := seen(); len(got) != 0 {
			t.Errorf("%s: the upstream served %d requests whose key the proxy dropped: %q", engine, len(got), got)
		}
	}
}

// TestAttackFoldedValue: a value folded over two lines (obs-fold) reaches
// the upstream as the limiter read it, or the request is refused: never
// as another value.
func TestAttackFoldedValue(t *testing.T) {
	fronts, seen := keyedFronts(t)
	for engine, addr := range fronts {
		s := statusOf(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\nX-Api-Key: a\r\n b\r\nAccept: */*\r\n\r\n")
		got := seen()
		switch {
		case s == http.StatusBadRequest && len(got) == 0:
		case s == http.StatusOK && len(got) == 1 && len(got[0]) == 1 && got[0][0] == "a b":
		default:
			t.Errorf("%s: status %d, upstream saw %q; want 400 and nothing, or 200 and [\"a b\"]", engine, s, got)
		}
	}
}

// TestAttackFoldedWhitespaceRotatesKey: white space folded onto a value
// (a continuation line of spaces) is not part of the value to the
// upstream, which trims it; the limiter must not count each amount of it
// as another key, or one key gets a fresh burst per request.
func TestAttackFoldedWhitespaceRotatesKey(t *testing.T) {
	fronts, seen := keyedFronts(t)
	for engine, addr := range fronts {
		for n := range 4 {
			statusOf(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\nX-Api-Key: K"+strings.Repeat("\r\n ", n)+"\r\n\r\n")
		}
		served := 0
		for _, v := range seen() {
			if len(v) == 1 && strings.TrimSpace(v[0]) == "K" {
				served++
			}
		}
		if served > 1 {
			t.Errorf("%s: the upstream served key K %d times, want at most the burst of 1", engine, served)
		}
	}
}

// TestAttackUpgradeAnsweredToASlowReader: an upgrade the gate allows that
// the upstream answers without switching (a long 200) is written to the
// client within --write-timeout, as on net/http: a client that does not
// read must not hold the connection, and the upstream's, for as long as
// the upstream has something to send.
func TestAttackUpgradeAnsweredToASlowReader(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// About 3 MB/s for 30 s: more than the connection buffers.
		chunk := make([]byte, 32<<10)
		end := time.After(30 * time.Second)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-end:
				return
			case <-tick.C:
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	lim, err := httplimit.New([]httplimit.Rule{{Name: "any", LimitKeys: []string{"ip:address"}, Rate: 100, Burst: 100}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	f := &settings.HTTP{UpstreamTimeout: 500 * time.Millisecond, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: time.Second, IdleTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, Upgrade: "websocket",
		UpgradeMaxDuration: time.Minute, UpgradeIdleTimeout: time.Minute, UpgradeMaxBytes: 1 << 20}
	h, closeProxy := PublicFast(lim, u, f, metrics.New(), logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute))
	defer closeProxy()
	l, err := ListenFast("public", "127.0.0.1:0", h, f, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	defer l.Shutdown(t.Context())
	c, err := net.Dial("tcp", l.Ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	// Not reading, well past --write-timeout; then whatever was sent
	// before the cut must end soon.
	time.Sleep(3 * time.Second)
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the response still streamed %d bytes 18 s after a --write-timeout of 1 s", n)
	}
}
