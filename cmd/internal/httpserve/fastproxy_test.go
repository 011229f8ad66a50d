package httpserve

import (
	"bufio"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"
)

// quietLogger is a fasthttp.Logger that says nothing.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// fastFront is a fasthttp.Server on loopback in front of a fastProxy.
type fastFront struct {
	addr string
	m    *metrics.Metrics
	p    *fastProxy
}

// testFastProxy serves newFastProxy's proxy on loopback with a
// fasthttp.Server configured as serve's, behind a handler that sets a
// field first as the limiter does. tweak, if not nil, changes the proxy
// and the server before the server starts.
func testFastProxy(t *testing.T, upstream string, trusted bool, timeout time.Duration, tweak func(*fastProxy, *fasthttp.Server)) fastFront {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	logs := logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute)
	p, closeProxy := newFastProxy(u, &settings.HTTP{UpstreamTimeout: timeout}, m, logs)
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			p.serve(ctx, http.Header{"X-Rate": {"limiter"}}, trusted, nil)
		},
		StreamRequestBody:            true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		ReduceMemoryUsage:            true,
		// A request header as long as the longest of proxyShapes.
		ReadBufferSize: 32 << 10,
		Logger:         quietLogger{},
	}
	if tweak != nil {
		tweak(p, srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(); closeProxy() })
	return fastFront{ln.Addr().String(), m, p}
}

// TestFastProxyMatchesReverseProxy: for requests of every shape, the
// upstream receives the same request and the client the same response
// through the fasthttp proxy as through httputil.ReverseProxy, but for
// the differences listed in fastDifferences.
func TestFastProxyMatchesReverseProxy(t *testing.T) {
	rec := &recordingUpstream{}
	up := httptest.NewServer(rec)
	defer up.Close()
	// The upstream's own path and query, joined with the client's.
	for _, upURL := range []string{up.URL, up.URL + "/", up.URL + "/api", up.URL + "/api/?k=v"} {
		for _, trusted := range []bool{false, true} {
			compareFastProxy(t, rec, upURL, trusted)
		}
	}
}

// compareFastProxy sends every request of proxyShapes, twice on one
// connection, through the fasthttp proxy and the ReverseProxy to upURL.
func compareFastProxy(t *testing.T, rec *recordingUpstream, upURL string, trusted bool) {
	t.Helper()
	fast := testFastProxy(t, upURL, trusted, 5*time.Second, nil).addr
	reverse := testProxy(t, upURL, false, trusted, 5*time.Second)
	for _, c := range proxyShapes {
		reqs := []string{c.raw, c.raw}
		gotF := rawExchange(t, fast, reqs)
		seenF := rec.take()
		gotR := rawExchange(t, reverse.Listener.Addr().String(), reqs)
		seenR := rec.take()
		name := fmt.Sprintf("%s trusted=%v %.60q", upURL, trusted, strings.SplitN(c.raw, "\r\n", 2)[0])
		if !reflect.DeepEqual(gotF, gotR) {
			t.Errorf("%s: client got\n fast    %q\n reverse %q", name, gotF, gotR)
		}
		if len(seenF) != len(seenR) || len(seenF) == 0 {
			t.Fatalf("%s: upstream saw %d requests fast, %d reverse", name, len(seenF), len(seenR))
		}
		for i := range seenF {
			f, r := seenF[i], seenR[i]
			if !strings.Contains(c.raw, "Accept-Encoding") {
				// Only the ReverseProxy's transport asks for gzip.
				r.Header.Del("Accept-Encoding")
			}
			if len(r.Trailer) > 0 {
				// The ReverseProxy sends a request's trailers
				// empty (it copies the request's Trailer before
				// the body, whose end fills it); fastProxy
				// sends their values.
				for k, v := range r.Trailer {
					if len(v) != 0 || len(f.Trailer[k]) == 0 {
						t.Errorf("%s: trailer %s: fast %q, reverse %q; want a value, and none", name, k, f.Trailer[k], v)
					}
					f.Trailer[k] = v
				}
			}
			if !reflect.DeepEqual(f, r) {
				t.Errorf("%s: upstream saw\n fast    %+v\n reverse %+v", name, f, r)
			}
		}
	}
}

// fastGet fetches path through a front and returns the response, with
// its body read in full (err is the error reading it).
func fastGet(t *testing.T, f fastFront, path string) (*http.Response, string, error) {
	t.Helper()
	res, err := http.Get("http://" + f.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, string(body), err
}

// TestFastProxyUpstreamFailures: a stalled upstream gets 504 after the
// timeout; one that never ends its header, sends more than five
// informational responses, switches protocols unasked, answers garbage or
// a status below 100 gets 502: each a problem document with the limiter's
// fields, counted. A header under the limit but larger than a
// connection's buffer, and five informational responses, pass.
func TestFastProxyUpstreamFailures(t *testing.T) {
	const timeout = time.Second
	for _, tt := range upstreamAnswers(timeout) {
		t.Run(tt.name, func(t *testing.T) {
			up := oneShotUpstream(t, func(c net.Conn, _ *bufio.Reader) { tt.answer(c) })
			f := testFastProxy(t, up, false, timeout, nil)
			res, body, err := fastGet(t, f, "/x")
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tt.want {
				t.Fatalf("%d %s, want %d", res.StatusCode, body, tt.want)
			}
			counted := testutil.ToFloat64(f.m.UpstreamErrors.WithLabelValues(strconv.Itoa(tt.want)))
			if tt.want == http.StatusOK {
				if body != "ok" || counted != 0 {
					t.Errorf("body %q, %v upstream errors counted; want ok, none", body, counted)
				}
				return
			}
			detail := "The upstream server could not be reached, or did not answer with a valid response."
			if tt.want == http.StatusGatewayTimeout {
				detail = fmt.Sprintf("The upstream server did not answer within %v.", timeout)
			}
			if want := string(problemBody(tt.want, detail)); body != want || res.Header.Get("Content-Type") != "application/problem+json" ||
				res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("X-Rate") != "limiter" {
				t.Errorf("answer %v %q, want the problem document %q with X-Rate", res.Header, body, want)
			}
			if counted != 1 {
				t.Errorf("%v upstream errors counted as %d, want 1", counted, tt.want)
			}
		})
	}
}

// TestFastProxyCutsATruncatedBody: a body the upstream ends early reaches
// the client as an error, not as a shorter response that looks whole, for
// either framing.
func TestFastProxyCutsATruncatedBody(t *testing.T) {
	for name, answer := range map[string]string{
		"length":  "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b",
		"chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			up := oneShotUpstream(t, func(c net.Conn, _ *bufio.Reader) { io.WriteString(c, answer) })
			f := testFastProxy(t, up, false, 5*time.Second, nil)
			res, err := http.Get("http://" + f.addr + "/x")
			if err != nil {
				return // cut before the header: also not whole
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err == nil {
				t.Errorf("the client read a whole body %q; want an error", body)
			}
			waitIdle(t, f.p, 0)
		})
	}
}

// waitIdle waits until the proxy's upstream connections are all idle, and
// idle of them: no request holds one any more.
func waitIdle(t *testing.T, p *fastProxy, idle int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, i := p.hc.ConnsCount(), p.hc.IdleConnsCount()
		if n == idle && i == idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream connections, %d idle; want %d, all idle", n, i, idle)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFastProxyStreams: a streamed response reaches the client as it
// comes: the client reads the first part before the upstream sends the
// second.
func TestFastProxyStreams(t *testing.T) {
	for _, ct := range []string{"text/plain", "text/event-stream"} {
		t.Run(ct, func(t *testing.T) {
			read := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", ct)
				io.WriteString(w, "first\n")
				w.(http.Flusher).Flush()
				select {
				case <-read:
				case <-time.After(10 * time.Second):
				}
				io.WriteString(w, "second\n")
			}))
			defer up.Close()
			f := testFastProxy(t, up.URL, false, 5*time.Second, nil)
			res, err := http.Get("http://" + f.addr + "/stream")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			br := bufio.NewReader(res.Body)
			first, err := br.ReadString('\n')
			if err != nil || first != "first\n" {
				t.Fatalf("first part %q, %v", first, err)
			}
			close(read)
			rest, err := io.ReadAll(br)
			if err != nil || string(rest) != "second\n" {
				t.Fatalf("second part %q, %v", rest, err)
			}
		})
	}
}

// TestFastProxyClientBodyFailure: a client that fails to send its body
// gets 400, or 408 when the server's read timeout cut it, not a 502 or
// 504, and the upstream is not blamed.
func TestFastProxyClientBodyFailure(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		want      int
	}{
		{"bad chunk", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\nzz\r\n", http.StatusBadRequest},
		{"stalled", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("b", 50000), http.StatusRequestTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingUpstream{}
			up := httptest.NewServer(rec)
			defer up.Close()
			f := testFastProxy(t, up.URL, false, 5*time.Second, func(_ *fastProxy, s *fasthttp.Server) {
				s.ReadTimeout = time.Second
			})
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(c, tt.raw)
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			if want := string(problemBody(tt.want, "The request body did not arrive in full.")); res.StatusCode != tt.want || string(body) != want {
				t.Errorf("%d %q, want %d %q", res.StatusCode, body, tt.want, want)
			}
			for _, s := range []string{"502", "504"} {
				if n := testutil.ToFloat64(f.m.UpstreamErrors.WithLabelValues(s)); n != 0 {
					t.Errorf("%v upstream errors counted as %s", n, s)
				}
			}
			waitIdle(t, f.p, 0)
		})
	}
}

// bigUpstream answers with a body far larger than the sockets buffer,
// and closes cut when a write fails: the proxy closed its connection.
func bigUpstream(t *testing.T) (string, chan struct{}) {
	cut := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 256 { // 256 MiB
			if _, err := w.Write(chunk); err != nil {
				close(cut)
				return
			}
		}
	}))
	t.Cleanup(up.Close)
	return up.URL, cut
}

// TestFastProxySlowReaderFreesTheUpstream: a client that stops reading a
// large response is cut at the server's write timeout, and the upstream
// connection is closed with it, not kept waiting or pooled half-read.
func TestFastProxySlowReaderFreesTheUpstream(t *testing.T) {
	up, cut := bigUpstream(t)
	f := testFastProxy(t, up, false, 5*time.Second, func(_ *fastProxy, s *fasthttp.Server) {
		s.WriteTimeout = time.Second
	})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
	select {
	case <-cut:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream kept writing 30 s after the client stopped reading")
	}
	waitIdle(t, f.p, 0)
}

// TestFastProxyClientLeavingMidBody: a client that leaves in the middle
// of a large body has the upstream connection closed, and the proxy
// serves the next request.
func TestFastProxyClientLeavingMidBody(t *testing.T) {
	up, cut := bigUpstream(t)
	f := testFastProxy(t, up, false, 5*time.Second, nil)
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
	if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-cut:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream kept writing 30 s after the client left")
	}
	waitIdle(t, f.p, 0)
}

// TestFastProxyUnderAFlood: 64 requests at once are all answered, each
// on a connection of its own that the pool keeps afterwards, idle; then
// closing the idle connections leaves none.
func TestFastProxyUnderAFlood(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	f := testFastProxy(t, up.URL, false, 5*time.Second, nil)
	const n = 64
	errs := make(chan error, n)
	for range n {
		go func() {
			res, err := http.Get("http://" + f.addr + "/x")
			if err != nil {
				errs <- err
				return
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err == nil && (res.StatusCode != http.StatusOK || string(body) != "ok") {
				err = fmt.Errorf("%d %q", res.StatusCode, body)
			}
			errs <- err
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	for f.p.hc.ConnsCount() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	waitIdle(t, f.p, n)
	f.p.hc.CloseIdleConnections()
	waitIdle(t, f.p, 0)
}

// TestFastProxyReusesOnlyCleanConnections: as the direct way does (see
// its tests of the same shapes), a connection the upstream closed without
// saying so, or closed as a request arrived, costs the client nothing (the
// request goes again on a new connection), and bytes the upstream sent
// past a response, at once or while the connection idled, are never read
// as another request's answer.
func TestFastProxyReusesOnlyCleanConnections(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer func(c net.Conn, i int) bool
		pause  time.Duration // between requests
	}{
		{"stale", func(c net.Conn, i int) bool {
			io.WriteString(c, okResponse)
			return false
		}, 20 * time.Millisecond},
		{"hangs up", func(c net.Conn, i int) bool {
			if i == 0 {
				io.WriteString(c, okResponse)
			}
			return i == 0
		}, 0},
		{"bytes unasked", func(c net.Conn, i int) bool {
			if i == 0 {
				io.WriteString(c, okResponse+"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
			} else {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
			}
			return true
		}, 0},
		{"spoke while idle", func(c net.Conn, i int) bool {
			io.WriteString(c, okResponse)
			if i == 0 {
				time.Sleep(50 * time.Millisecond)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
			}
			return true
		}, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := scriptedUpstream(t, tt.answer)
			f := testFastProxy(t, up, false, 5*time.Second, nil)
			for i := range 4 {
				res, body, err := fastGet(t, f, "/x")
				if err != nil || res.StatusCode != http.StatusOK || body != "ok" {
					t.Fatalf("request %d: %d %q %v, want 200 ok", i, res.StatusCode, body, err)
				}
				time.Sleep(tt.pause)
			}
		})
	}
}

// TestFastProxyTLS: an https upstream is reached over TLS, its
// certificate checked against the roots (the system's, unless set).
func TestFastProxyTLS(t *testing.T) {
	rec := &recordingUpstream{}
	up := httptest.NewTLSServer(rec)
	defer up.Close()
	untrusted := testFastProxy(t, up.URL, false, 5*time.Second, nil)
	if res, _, _ := fastGet(t, untrusted, "/x"); res.StatusCode != http.StatusBadGateway {
		t.Errorf("an upstream certificate no root signed: %d, want 502", res.StatusCode)
	}
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	trusted := testFastProxy(t, up.URL, false, 5*time.Second, func(p *fastProxy, _ *fasthttp.Server) {
		p.tls.RootCAs = roots
	})
	for range 2 {
		if res, body, err := fastGet(t, trusted, "/x"); err != nil || res.StatusCode != http.StatusOK || body != "ok /x" {
			t.Fatalf("%d %q %v, want 200 ok /x", res.StatusCode, body, err)
		}
	}
	if seen := rec.take(); len(seen) != 2 || seen[0].Host != strings.TrimPrefix(up.URL, "https://") {
		t.Errorf("upstream saw %+v", seen)
	}
	waitIdle(t, trusted.p, 1)
}

// TestFastProxyForwardsEarlyHints: a 103 reaches the client with its Link
// fields, and the final response keeps the fields set before the proxy
// ran, without the hints' Link.
func TestFastProxyForwardsEarlyHints(t *testing.T) {
	f := testFastProxy(t, earlyHintsUpstream(t), false, 5*time.Second, nil)
	checkEarlyHints(t, f.addr, "</style.css>; rel=preload")
}

// TestFastProxyMatchesReverseProxyOnRawAnswers: answers no net/http
// upstream gives (a body that ends with the connection, HTTP/1.0, fields
// repeated or named in Connection, an unknown status, trailers) reach the
// client as through the ReverseProxy, but for the differences listed:
// each is what the ReverseProxy's client got that the fasthttp proxy's
// did not, and must be there. (Trailers the upstream did not announce are
// left out: fasthttp's server writes only announced ones, and the
// ReverseProxy passes the others or not, depending on timing.)
func TestFastProxyMatchesReverseProxyOnRawAnswers(t *testing.T) {
	const ct = "Content-Type: text/plain\r\n"
	for _, tt := range []struct{ answer, differs string }{
		{"HTTP/1.1 200 OK\r\n" + ct + "\r\nuntil the end", ""},
		{"HTTP/1.0 200 OK\r\n" + ct + "Content-Length: 2\r\n\r\nok", ""},
		{"HTTP/1.1 200 OK\r\n" + ct + "Connection: close\r\nContent-Length: 2\r\n\r\nok", ""},
		{"HTTP/1.1 200 OK\r\n" + ct + "Set-Cookie: a=1\r\nSet-Cookie: a=2\r\nX-Dup: 1\r\nX-Dup: 2\r\nContent-Length: 2\r\n\r\nok", ""},
		{"HTTP/1.1 200 OK\r\n" + ct + "Connection: X-Hop, Server\r\nX-Hop: 1\r\nServer: s\r\nContent-Length: 2\r\n\r\nok", ""},
		{"HTTP/1.1 299 Custom\r\n" + ct + "Content-Length: 2\r\n\r\nok", ""},
		{"HTTP/1.1 200 OK\r\n" + ct + "Transfer-Encoding: chunked\r\nTrailer: X-A, X-B\r\n\r\n2\r\nok\r\n0\r\nX-A: 1\r\nX-B: 2\r\n\r\n", ""},
		// Net/http's server sniffs a type the upstream did not send;
		// fasthttp's passes the body as it came.
		{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", `Content-Type=["text/plain; charset=utf-8"] `},
	} {
		var got [2][]string
		for i, fast := range []bool{true, false} {
			up := oneShotUpstream(t, func(c net.Conn, _ *bufio.Reader) { io.WriteString(c, tt.answer) })
			addr := ""
			if fast {
				addr = testFastProxy(t, up, false, 5*time.Second, nil).addr
			} else {
				addr = testProxy(t, up, false, false, 5*time.Second).Listener.Addr().String()
			}
			got[i] = rawExchange(t, addr, []string{"GET /x HTTP/1.1\r\nHost: a\r\n\r\n"})
		}
		fast, reverse := got[0], got[1]
		if tt.differs != "" {
			if len(reverse) != 1 || !strings.Contains(reverse[0], tt.differs) {
				t.Errorf("%q: reverse %q, want it with %s", tt.answer, reverse, tt.differs)
				continue
			}
			reverse = []string{strings.Replace(reverse[0], tt.differs, "", 1)}
		}
		if !reflect.DeepEqual(fast, reverse) {
			t.Errorf("%q: client got\n fast    %q\n reverse %q", tt.answer, fast, reverse)
		}
	}
}

// TestFastProxyLargeBodies: bodies larger than every buffer pass whole
// both ways, with their framing: a request body of known length and a
// chunked one, and the response's.
func TestFastProxyLargeBodies(t *testing.T) {
	const size = 8 << 20
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil || n != size {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(make([]byte, size))
	}))
	defer up.Close()
	f := testFastProxy(t, up.URL, false, 5*time.Second, nil)
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(strings.Repeat("b", size))
		if chunked {
			body = io.MultiReader(body) // of unknown length
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+f.addr+"/up", body)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || n != size || res.ContentLength != size {
			t.Errorf("chunked=%v: %d, %d bytes of %d (%v), error %v", chunked, res.StatusCode, n, int64(size), res.ContentLength, err)
		}
	}
	waitIdle(t, f.p, 1)
}

// TestFastProxyFieldNamesInAnyCase: a server that passes field names as
// received does not let a client's forwarding or hop-by-hop field past
// the proxy by its case.
func TestFastProxyFieldNamesInAnyCase(t *testing.T) {
	rec := &recordingUpstream{}
	up := httptest.NewServer(rec)
	defer up.Close()
	f := testFastProxy(t, up.URL, false, 5*time.Second, func(_ *fastProxy, s *fasthttp.Server) {
		s.DisableHeaderNamesNormalizing = true
	})
	rawExchange(t, f.addr, []string{"GET /x HTTP/1.1\r\nHost: a\r\nx-forwarded-for: 203.0.113.7\r\nFORWARDED: for=1.1.1.1\r\n" +
		"connection: x-secret\r\nx-secret: s\r\nproxy-authorization: Basic x\r\nuser-agent: ua\r\n\r\n"})
	seen := rec.take()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	h := seen[0].Header
	if got := h["X-Forwarded-For"]; len(got) != 1 || got[0] != "127.0.0.1" || h["Forwarded"] != nil || h["X-Secret"] != nil ||
		h["Proxy-Authorization"] != nil || h.Get("User-Agent") != "ua" || len(h["User-Agent"]) != 1 {
		t.Errorf("upstream saw %v", h)
	}
}

// The proxy may open as many upstream connections as there may be client
// connections, each carrying one request at a time: a slow upstream under
// --max-conns concurrent requests makes none wait for a free one.
func TestFastProxyConnCapFollowsMaxConns(t *testing.T) {
	logs := logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute)
	for _, c := range []struct{ maxConns, want int }{{0, math.MaxInt32}, {10, maxIdleUpstreamConns}, {5000, 5000}} {
		p, closeProxy := newFastProxy(&url.URL{Scheme: "http", Host: "127.0.0.1:1"}, &settings.HTTP{UpstreamTimeout: time.Second, MaxConns: c.maxConns}, metrics.New(), logs)
		closeProxy()
		if p.hc.MaxConns != c.want {
			t.Errorf("--max-conns %d: at most %d upstream connections, want %d", c.maxConns, p.hc.MaxConns, c.want)
		}
	}
}
