package httpserve

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/valyala/fasthttp"
)

// viewOf is what the limiter may read of a request, as text.
func viewOf(r *http.Request, body string) string {
	h := r.Header
	return fmt.Sprintf("%s %q %s host=%q %s len=%d te=%v close=%v header=%s body=%q",
		r.Method, r.RequestURI, r.URL.String(), r.Host, r.Proto, r.ContentLength, r.TransferEncoding, r.Close, sortedHeader(h), body)
}

// viewServers serves the same handler of views on net/http and on
// fasthttp (through requestView), and returns their addresses and the
// views each saw, in order.
func viewServers(t *testing.T) (netAddr, fastAddr string, views func() (nets, fasts []string)) {
	t.Helper()
	var mu sync.Mutex
	var seenNet, seenFast []string
	ns := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seenNet = append(seenNet, viewOf(r, string(b)))
		mu.Unlock()
	}), ReadHeaderTimeout: 5 * time.Second}
	nln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ns.Serve(nln)
	t.Cleanup(func() { ns.Close() })
	f := &settings.HTTP{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: 5 * time.Second, MaxHeaderBytes: 64 << 10}
	l, err := ListenFast("public", "127.0.0.1:0", fastHandler(f, func(e *requestView) {
		b, _ := io.ReadAll(e.r.Body)
		mu.Lock()
		seenFast = append(seenFast, viewOf(e.r, string(b)))
		mu.Unlock()
	}), f, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	t.Cleanup(func() { l.Shutdown(t.Context()) })
	return nln.Addr().String(), l.Ln.Addr().String(), func() ([]string, []string) {
		mu.Lock()
		defer mu.Unlock()
		n, f := seenNet, seenFast
		seenNet, seenFast = nil, nil
		return n, f
	}
}

// statusOf sends raw on a new connection to addr and returns the status
// of the answer, or 0 if there is none.
func statusOf(t *testing.T, addr, raw string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, raw)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// closedUnanswered reports whether the server, sent raw, closes the
// connection without an answer (rather than answering or leaving it open).
func closedUnanswered(t *testing.T, addr, raw string) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, raw)
	n, err := io.Copy(io.Discard, c)
	return n == 0 && err == nil
}

// TestFastRequestMatchesNetHTTP: the limiter reads of a request on
// fasthttp what it reads on net/http: method, target, host, header with
// every value of a repeated field (which fasthttp keeps one of for some),
// body; and what net/http refuses as malformed is refused.
func TestFastRequestMatchesNetHTTP(t *testing.T) {
	netAddr, fastAddr, views := viewServers(t)
	for _, raw := range []string{
		"GET /x?a=1&b=%20 HTTP/1.1\r\nHost: front\r\nX-Api-Key: k\r\nAccept: */*\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nUser-Agent: a\r\nUser-Agent: b\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nContent-Type: a\r\ncontent-type: b\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nCookie: a=1;b=2;  c ; =d\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nx-api_key: 1\r\nX-API-KEY: 2\r\nx-api-key: 3\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2, 10.0.0.3\r\n\r\n",
		"GET http://other.example/a/b?q HTTP/1.1\r\nHost: front\r\n\r\n",
		"GET /a/../b/%2e/c//d HTTP/1.1\r\nHost: front\r\n\r\n",
		"GET /%7B%7D?x=%zz HTTP/1.1\r\nHost: front\r\n\r\n",
		"post /x HTTP/1.1\r\nHost: front\r\nContent-Length: 0\r\n\r\n",
		"GET /x HTTP/1.0\r\n\r\n",
		"GET /x HTTP/1.0\r\nHost: front\r\nConnection: keep-alive\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nConnection: close\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nConnection: X-A\r\nConnection: keep-alive\r\n\r\n",
		"GET /x HTTP/1.0\r\nHost: front\r\nConnection: X-A\r\nconnection: close\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: front\r\nContent-Length: 5\r\n\r\nhello",
		"POST /x HTTP/1.1\r\nHost: front\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nAuthorization: Bearer a.b.c\r\nX-Empty:\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
	} {
		for _, addr := range []string{netAddr, fastAddr} {
			if s := statusOf(t, addr, raw); s != http.StatusOK {
				t.Errorf("%q to %s: status %d, want 200", raw, addr, s)
			}
		}
		nets, fasts := views()
		if len(nets) != 1 || len(fasts) != 1 {
			t.Errorf("%q: %d views on net/http, %d on fasthttp, want 1 each", raw, len(nets), len(fasts))
			continue
		}
		if nets[0] != fasts[0] {
			t.Errorf("%q:\nnet/http %s\nfasthttp %s", raw, nets[0], fasts[0])
		}
	}
	for _, raw := range []string{
		"GET /x HTTP/1.1\r\nHost: front\r\nX A: 1\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nX\x01: 1\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: front\r\nX-A: 1\x01\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: a b\r\n\r\n",
		"GET /x HTTP/1.1\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: front\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"GET x HTTP/1.1\r\nHost: front\r\n\r\n",
		"GET /x HTTP/9.9\r\nHost: front\r\n\r\n",
	} {
		n, f := statusOf(t, netAddr, raw), statusOf(t, fastAddr, raw)
		if n != http.StatusBadRequest && n != http.StatusHTTPVersionNotSupported {
			t.Fatalf("%q: net/http answered %d; the test expects it to refuse", raw, n)
		}
		if f < 400 || f > 505 {
			t.Errorf("%q: net/http answered %d, fasthttp %d, want a refusal", raw, n, f)
		}
		if nets, fasts := views(); len(nets)+len(fasts) != 0 {
			t.Errorf("%q reached a handler: %q %q", raw, nets, fasts)
		}
	}
}

// TestFastHeaderBounds: a header over --max-header-bytes gets 431, and
// one that does not arrive within --read-header-timeout is answered 408
// and closed, as is a new connection that sends nothing.
func TestFastHeaderBounds(t *testing.T) {
	f := &settings.HTTP{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: 5 * time.Second, MaxHeaderBytes: 4 << 10}
	l, err := ListenFast("public", "127.0.0.1:0", fastHandler(f, func(e *requestView) { serveHealth(&e.w) }), f, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	defer l.Shutdown(t.Context())
	addr := l.Ln.Addr().String()
	if s := statusOf(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\nX-Big: "+strings.Repeat("b", 8<<10)+"\r\n\r\n"); s != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("an 8 KiB header under a 4 KiB bound: %d, want 431", s)
	}
	for _, partial := range []string{"", "GET /x HTTP/1.1\r\nHost: a\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.SetDeadline(start.Add(10 * time.Second))
		io.WriteString(c, partial)
		rest, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Errorf("%q: %v after %v, want the connection closed", partial, err, time.Since(start))
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%q: closed after %v, want about 300 ms", partial, el)
		}
		if partial != "" && !strings.HasPrefix(string(rest), "HTTP/1.1 408") {
			t.Errorf("%q: answered %q, want 408", partial, rest)
		}
	}
}

// TestFastBodyBound: a body that stops arriving fails to read once
// --read-timeout has passed since the request's first byte, both within
// the part fasthttp reads before the handler runs and after it.
func TestFastBodyBound(t *testing.T) {
	f := &settings.HTTP{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: 5 * time.Second, MaxHeaderBytes: 4 << 10}
	got := make(chan error, 1)
	l, err := ListenFast("public", "127.0.0.1:0", fastHandler(f, func(e *requestView) {
		_, err := io.Copy(io.Discard, e.r.Body)
		got <- err
		e.w.WriteHeader(http.StatusNoContent)
	}), f, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	defer l.Shutdown(t.Context())
	for _, sent := range []int{10, 9000} { // before and after the first 8 KiB
		c, err := net.Dial("tcp", l.Ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.SetDeadline(start.Add(10 * time.Second))
		fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 20000\r\n\r\n%s", strings.Repeat("b", sent))
		io.ReadAll(c) // until the server closes
		c.Close()
		el := time.Since(start)
		if el > 5*time.Second || el < 500*time.Millisecond {
			t.Errorf("%d of 20000 bytes sent: closed after %v, want about 1 s", sent, el)
		}
		if sent > 8192 {
			select {
			case err := <-got:
				if err == nil {
					t.Errorf("%d of 20000 bytes sent: the handler read the body in full", sent)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%d of 20000 bytes sent: the handler never ran", sent)
			}
		}
	}
}

// TestFastConnStateFeedsConncap: the connection cap counts fasthttp's
// connections, frees a slot when one closes, and evicts a quiet one at the
// cap.
func TestFastConnStateFeedsConncap(t *testing.T) {
	f := &settings.HTTP{ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: 30 * time.Second, MaxHeaderBytes: 4 << 10}
	l, err := ListenFast("public", "127.0.0.1:0", fastHandler(f, func(e *requestView) { serveHealth(&e.w) }), f, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	defer l.Shutdown(t.Context())
	addr := l.Ln.Addr().String()
	keep := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		return c, br
	}
	a, abr := keep()
	defer a.Close()
	b, _ := keep()
	defer b.Close()
	if open, _, _ := l.Conns.Stats(); open != 2 {
		t.Fatalf("%d connections open, want 2", open)
	}
	// A third takes the place of the one quiet longest: a.
	c, _ := keep()
	defer c.Close()
	a.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := abr.ReadByte(); err == nil {
		t.Error("the connection quiet longest still open at the cap, want it closed")
	}
	if _, evicted, _ := l.Conns.Stats(); evicted != 1 {
		t.Errorf("%d evicted, want 1", evicted)
	}
}

// BenchmarkPublicFast is PublicFast's handler on one request, without the
// connection around it: way=admit proxies a GET to an upstream on
// loopback, and way=deny answers a 429 from the built-in rule's shape. The
// allocations it counts are the handler's own, and the response's writing.
func BenchmarkPublicFast(b *testing.B) {
	for _, bc := range []struct {
		name       string
		rate, size float64
		want       int
	}{
		{"way=admit", 1e6, 1e6, http.StatusOK},
		{"way=deny", 5, 10, http.StatusTooManyRequests},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h, closeProxy := fastTestHandler(b, rawUpstream(b), bc.rate, bc.size)
			defer closeProxy()
			var ctx fasthttp.RequestCtx
			var req fasthttp.Request
			if err := req.Read(bufio.NewReader(strings.NewReader("GET /x HTTP/1.1\r\nHost: front.example\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"))); err != nil {
				b.Fatal(err)
			}
			client, server := net.Pipe()
			defer client.Close()
			defer server.Close()
			conn := &fastConn{Conn: server, remote: "192.0.2.1:1234"}
			ctx.Init2(conn, nil, false)
			w := bufio.NewWriter(io.Discard)
			serve := func() {
				ctx.Response.Reset()
				req.CopyTo(&ctx.Request)
				h(&ctx)
				// As the server does: the body stream, if any, is
				// written and closed.
				if err := ctx.Response.Write(w); err != nil {
					b.Fatal(err)
				}
				w.Flush()
			}
			for range 20 { // spend the deny rule's burst
				serve()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				serve()
			}
			if s := ctx.Response.StatusCode(); s != bc.want {
				b.Fatalf("status %d, want %d", s, bc.want)
			}
		})
	}
}

// fastTestHandler is PublicFast with one per-IP rule of rate and size,
// proxying to u.
func fastTestHandler(tb testing.TB, u *url.URL, rate, size float64) (fasthttp.RequestHandler, func()) {
	lim, err := httplimit.New([]httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: rate, Burst: size}}, httplimit.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { lim.Close() })
	logs := logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute)
	f := &settings.HTTP{UpstreamTimeout: 5 * time.Second, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	return PublicFast(lim, u, f, metrics.New(), logs)
}

// TestFastUpgradeWithBodyRefused: an upgrade the gate allows, sent with a
// body, is refused (fasthttp hands the connection over only after the
// request was answered, too late to read the body), and reaches no
// upstream; without a body it is forwarded and tunnelled.
func TestFastUpgradeWithBodyRefused(t *testing.T) {
	reached := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- r.Method + " " + r.URL.Path
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString("echo " + line)
		brw.Flush()
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	lim, err := httplimit.New([]httplimit.Rule{{Name: "any", LimitKeys: []string{"ip:address"}, Rate: 100, Burst: 100}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	f := &settings.HTTP{UpstreamTimeout: 5 * time.Second, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, Upgrade: "websocket",
		UpgradeMaxDuration: time.Minute, UpgradeIdleTimeout: time.Minute, UpgradeMaxBytes: 1 << 20}
	h, closeProxy := PublicFast(lim, u, f, metrics.New(), logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute))
	defer closeProxy()
	l, err := ListenFast("public", "127.0.0.1:0", h, f, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	defer l.Shutdown(t.Context())
	const upgrade = "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
	if s := statusOf(t, l.Ln.Addr().String(), upgrade+"Content-Length: 5\r\n\r\nhello"); s != http.StatusBadRequest {
		t.Errorf("an upgrade with a body: %d, want 400", s)
	}
	select {
	case got := <-reached:
		t.Errorf("an upgrade with a body reached the upstream: %s", got)
	default:
	}
	c, err := net.Dial("tcp", l.Ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, upgrade+"\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Ratelimit-Policy") == "" {
		t.Fatalf("an upgrade without a body: %v %v, want 101 with the limiter's fields", res, err)
	}
	io.WriteString(c, "ping\n")
	if line, err := br.ReadString('\n'); line != "echo ping\n" {
		t.Errorf("through the tunnel: %q %v, want the upstream's echo", line, err)
	}
}

// TestFastPanicClosesOneConnection: a handler that panics costs its
// connection, unanswered, and a log line; the server serves on, as
// net/http's does. A panic with http.ErrAbortHandler is not logged.
func TestFastPanicClosesOneConnection(t *testing.T) {
	f := &settings.HTTP{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: 5 * time.Second, MaxHeaderBytes: 4 << 10}
	var logged strings.Builder
	var mu sync.Mutex
	errorLog := log.New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), "", 0)
	l, err := ListenFast("public", "127.0.0.1:0", fastHandler(f, func(e *requestView) {
		switch e.r.URL.Path {
		case "/panic":
			panic("boom")
		case "/abort":
			panic(http.ErrAbortHandler)
		}
		serveHealth(&e.w)
	}), f, 0, errorLog)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	defer l.Shutdown(t.Context())
	addr := l.Ln.Addr().String()
	for _, path := range []string{"/panic", "/abort"} {
		if !closedUnanswered(t, addr, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n") {
			t.Errorf("%s: answered or left open, want the connection closed unanswered", path)
		}
	}
	if s := statusOf(t, addr, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n"); s != http.StatusOK {
		t.Errorf("after the panics: %d, want 200", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logged.String(), "panic serving"); n != 1 || !strings.Contains(logged.String(), "boom") {
		t.Errorf("log %q, want one panic logged, boom", logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestFastUpgradePanicClosesOneConnection: a panic while an upgrade is
// served on the connection fasthttp handed over (its own goroutine, out
// of the handler's recovery) costs that connection and a log line.
func TestFastUpgradePanicClosesOneConnection(t *testing.T) {
	f := &settings.HTTP{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: 5 * time.Second, MaxHeaderBytes: 4 << 10}
	var logged strings.Builder
	var mu sync.Mutex
	rp := &httputil.ReverseProxy{
		Rewrite: func(*httputil.ProxyRequest) { panic("boom") },
		ErrorLog: log.New(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logged.Write(p)
		}), "", 0),
	}
	l, err := ListenFast("public", "127.0.0.1:0", fastHandler(f, func(e *requestView) {
		if e.r.URL.Path == "/ws" {
			fastUpgrade(e.w.ctx, rp, e.r, e.w.h, time.Now().Add(5*time.Second))
			return
		}
		serveHealth(&e.w)
	}), f, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	defer l.Shutdown(t.Context())
	addr := l.Ln.Addr().String()
	if !closedUnanswered(t, addr, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n") {
		t.Error("answered or left open, want the connection closed unanswered")
	}
	if s := statusOf(t, addr, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n"); s != http.StatusOK {
		t.Errorf("after the panic: %d, want 200", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "boom") {
		t.Errorf("log %q, want the panic", logged.String())
	}
}

// TestFastTunnelEndedByTheUpstream: when the upstream ends a tunnel while
// the client still sends, the client's connection is closed, and nothing
// reads it once the server is done with it (under -race, a read of the
// connection after fasthttp reused its wrapper is reported, or panics).
func TestFastTunnelEndedByTheUpstream(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nbye\n")
		brw.Flush()
		c.Close()
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	lim, err := httplimit.New([]httplimit.Rule{{Name: "any", LimitKeys: []string{"ip:address"}, Rate: 100, Burst: 100}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	f := &settings.HTTP{UpstreamTimeout: 5 * time.Second, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, Upgrade: "websocket",
		UpgradeMaxDuration: time.Minute, UpgradeIdleTimeout: time.Minute, UpgradeMaxBytes: 1 << 20}
	h, closeProxy := PublicFast(lim, u, f, metrics.New(), logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute))
	defer closeProxy()
	l, err := ListenFast("public", "127.0.0.1:0", h, f, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Serve()
	defer l.Shutdown(t.Context())
	for i := range 20 {
		c, err := net.Dial("tcp", l.Ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("tunnel %d: %v %v, want 101", i, res, err)
		}
		// Keep sending until the closed tunnel refuses it.
		for range 50 {
			if _, err := io.WriteString(c, "more\n"); err != nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		rest, err := io.ReadAll(br)
		if string(rest) != "bye\n" {
			t.Errorf("tunnel %d: read %q %v, want the upstream's last words and the end", i, rest, err)
		}
		c.Close()
	}
}
