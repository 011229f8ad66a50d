package httpserve

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
)

// seenRequest is what an upstream received, as its handler sees it.
type seenRequest struct {
	Method, URI, Host, Body string
	Header, Trailer         http.Header
}

// recordingUpstream answers by path, and records every request it gets.
type recordingUpstream struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.seen = append(u.seen, seenRequest{r.Method, r.RequestURI, r.Host, string(body), r.Header.Clone(), r.Trailer.Clone()})
	u.mu.Unlock()
	h := w.Header()
	switch r.URL.Path {
	case "/stream":
		h.Set("Content-Type", "text/plain")
		for i := range 3 {
			fmt.Fprintf(w, "part %d\n", i)
			w.(http.Flusher).Flush()
		}
	case "/hop":
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "1")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Proxy-Authenticate", "Basic")
		h.Set("X-Kept", "2")
		io.WriteString(w, "hop")
	case "/trailer":
		h.Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		h.Set("X-Sum", "42")
	case "/empty":
		w.WriteHeader(http.StatusNoContent)
	case "/notmod":
		w.WriteHeader(http.StatusNotModified)
	case "/cookies":
		h.Add("Set-Cookie", "a=1")
		h.Add("Set-Cookie", "b=2")
		h.Add("X-Rate", "upstream")
		io.WriteString(w, "cookies")
	case "/close":
		h.Set("Connection", "close")
		io.WriteString(w, "closing")
	default:
		h.Set("Content-Type", "text/plain")
		io.WriteString(w, "ok "+r.URL.Path)
	}
}

func (u *recordingUpstream) take() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.seen
	u.seen = nil
	return s
}

// testProxy serves newProxy's handler (direct or not) on loopback, behind
// a handler that sets a field first as the limiter does; the client at
// 127.0.0.1 is a trusted proxy when trusted is set.
func testProxy(t *testing.T, upstream string, direct, trusted bool, timeout time.Duration) *httptest.Server {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	var opts httplimit.Options
	if trusted {
		opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
	lim, err := httplimit.New([]httplimit.Rule{{Name: "any", LimitKeys: []string{"ip:address"}, Rate: 1, Burst: 1}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	logs := logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute)
	h, closeProxy := buildProxy(u, &settings.HTTP{UpstreamTimeout: timeout}, lim, metrics.New(), logs, direct)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Rate", "limiter")
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.Close(); closeProxy() })
	return srv
}

// rawExchange sends raw requests on one connection to addr and returns
// the responses, read as a client reads them, with the body and trailers
// in full and the Date field dropped.
func rawExchange(t *testing.T, addr string, reqs []string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	var out []string
	for _, raw := range reqs {
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Fatalf("test request %q: %v", raw, err)
		}
		res, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("%q: body: %v", raw, err)
		}
		res.Header.Del("Date")
		out = append(out, fmt.Sprintf("%d %v len=%d te=%v body=%q trailer=%v", res.StatusCode, sortedHeader(res.Header), res.ContentLength, res.TransferEncoding, body, res.Trailer))
		if res.Close {
			break
		}
	}
	return out
}

func sortedHeader(h http.Header) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q ", k, h[k])
	}
	return b.String()
}

// oneShotUpstream listens on loopback, and answers the first request of
// the first connection with answer, which writes what it likes on the
// connection; it returns the upstream's URL.
func oneShotUpstream(t *testing.T, answer func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err == nil {
			answer(c, br)
		}
	}()
	return "http://" + ln.Addr().String()
}

// eligibleHeaders are fields that leave a request fit for the direct way:
// forwarding, hop-by-hop and repeated ones.
const eligibleHeaders = "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 198.51.100.1\r\nForwarded: for=1.1.1.1\r\n" +
	"X-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\nConnection: keep-alive\r\nKeep-Alive: 300\r\n" +
	"Proxy-Authorization: Basic x\r\nProxy-Connection: keep-alive\r\nUpgrade: foo\r\nContent-Length: 0\r\n" +
	"Cookie: a=1\r\nCookie: b=2\r\nX-Multi: 1\r\nX-Multi: 2\r\nAccept: */*\r\n"

// proxyShapes are requests of every shape a proxy must forward as the
// ReverseProxy does; eligible says whether the direct way takes them.
var proxyShapes = []struct {
	raw      string
	eligible bool
}{
	{"GET /plain HTTP/1.1\r\nHost: front.example\r\nUser-Agent: ua1\r\nUser-Agent: ua2\r\n" + eligibleHeaders + "\r\n", true},
	{"HEAD /plain HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"OPTIONS /plain HTTP/1.1\r\nHost: front.example\r\nUser-Agent:\r\n\r\n", true},
	{"GET /q?a=1&b=%20c&d=%7e HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /q? HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /pa%2Fth/%C3%A9?x HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /stream HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /hop HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /trailer HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /empty HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /notmod HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /cookies HTTP/1.1\r\nHost: front.example\r\nAccept-Encoding: identity\r\n\r\n", true},
	{"GET /q?a;b HTTP/1.1\r\nHost: front.example\r\n\r\n", false},
	{"GET /q?a=%zz HTTP/1.1\r\nHost: front.example\r\n\r\n", false},
	{"GET /te HTTP/1.1\r\nHost: front.example\r\nTE: trailers\r\n\r\n", false},
	{"GET /conn HTTP/1.1\r\nHost: front.example\r\nConnection: X-Secret\r\nX-Secret: s\r\n\r\n", false},
	{"POST /post HTTP/1.1\r\nHost: front.example\r\nContent-Length: 4\r\n\r\nbody", false},
	{"GET /body HTTP/1.1\r\nHost: front.example\r\nContent-Length: 4\r\n\r\nbody", false},
	{"DELETE /del HTTP/1.1\r\nHost: front.example\r\n\r\n", false},
	{"POST /chunked HTTP/1.1\r\nHost: front.example\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n4\r\nmore\r\n0\r\n\r\n", false},
	{"GET /raw/\xc3\xa9/%41 HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET http://front.example/abs?x=1 HTTP/1.1\r\nHost: front.example\r\nx-lower: 1\r\n\r\n", false},
	{"POST /trailers HTTP/1.1\r\nHost: front.example\r\nTransfer-Encoding: chunked\r\nTrailer: X-T, X-U\r\n\r\n4\r\nbody\r\n0\r\nX-T: 1\r\nX-U: 2\r\nX-U: 3\r\n\r\n", false},
	{"PUT /put HTTP/1.1\r\nHost: front.example\r\nContent-Length: 0\r\nContent-Type: text/plain\r\n\r\n", false},
	{"GET /close HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /many?" + strings.Repeat("a&", 9999) + "a HTTP/1.1\r\nHost: front.example\r\n\r\n", true},
	{"GET /many?" + strings.Repeat("a&", 10000) + "a HTTP/1.1\r\nHost: front.example\r\n\r\n", false},
}

// TestDirectMatchesReverseProxy: for requests of every shape, the
// upstream receives the same request and the client the same response
// through the direct way as through httputil.ReverseProxy, but for
// Accept-Encoding, which only the ReverseProxy's transport adds (which
// also tells which way a request went).
func TestDirectMatchesReverseProxy(t *testing.T) {
	rec := &recordingUpstream{}
	up := httptest.NewServer(rec)
	defer up.Close()
	cases := proxyShapes
	for _, trusted := range []bool{false, true} {
		direct := testProxy(t, up.URL, true, trusted, 5*time.Second)
		reverse := testProxy(t, up.URL, false, trusted, 5*time.Second)
		for _, c := range cases {
			// Twice on one connection, so that the second request
			// reuses a pooled upstream connection.
			reqs := []string{c.raw, c.raw}
			gotD := rawExchange(t, direct.Listener.Addr().String(), reqs)
			seenD := rec.take()
			gotR := rawExchange(t, reverse.Listener.Addr().String(), reqs)
			seenR := rec.take()
			name := fmt.Sprintf("trusted=%v %.60q", trusted, strings.SplitN(c.raw, "\r\n", 2)[0])
			if !reflect.DeepEqual(gotD, gotR) {
				t.Errorf("%s: client got\n direct  %q\n reverse %q", name, gotD, gotR)
			}
			if len(seenD) != len(seenR) || len(seenD) == 0 {
				t.Fatalf("%s: upstream saw %d requests direct, %d reverse", name, len(seenD), len(seenR))
			}
			for i := range seenD {
				d, r := seenD[i], seenR[i]
				aeD, aeR := d.Header.Get("Accept-Encoding"), r.Header.Get("Accept-Encoding")
				wentDirect := c.eligible && !strings.Contains(c.raw, "Accept-Encoding") && r.Method != http.MethodHead
				if wentDirect && (aeD != "" || aeR != "gzip") {
					t.Errorf("%s: Accept-Encoding direct %q, reverse %q: the request did not take the direct way", name, aeD, aeR)
				}
				if !c.eligible && aeD != aeR {
					t.Errorf("%s: Accept-Encoding direct %q, reverse %q: an ineligible request took the direct way", name, aeD, aeR)
				}
				if !strings.Contains(c.raw, "Accept-Encoding") {
					d.Header.Del("Accept-Encoding")
					r.Header.Del("Accept-Encoding")
				}
				if !reflect.DeepEqual(d, r) {
					t.Errorf("%s: upstream saw\n direct  %+v\n reverse %+v", name, d, r)
				}
			}
		}
	}
}

// scriptedUpstream serves every connection on loopback: answer is called
// for the i-th request read on a connection (from 0), and the connection
// is closed when it returns false or a read fails. It returns the URL.
func scriptedUpstream(t *testing.T, answer func(c net.Conn, i int) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					if _, err := http.ReadRequest(br); err != nil || !answer(c, i) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// getBody fetches url and returns the status and the body.
func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

const okResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// TestDirectRetriesAStaleConnection: an upstream that closes each
// connection after answering, without saying so, leaves a dead
// connection in the pool; the next request goes on a new one rather than
// failing with 502.
func TestDirectRetriesAStaleConnection(t *testing.T) {
	up := scriptedUpstream(t, func(c net.Conn, i int) bool {
		io.WriteString(c, okResponse)
		return false
	})
	srv := testProxy(t, up, true, false, 5*time.Second)
	for i := range 5 {
		if status, body := getBody(t, srv.URL+"/x"); status != http.StatusOK || body != "ok" {
			t.Fatalf("request %d: %d %q, want 200 ok", i, status, body)
		}
		time.Sleep(20 * time.Millisecond) // let the close reach the pooled connection
	}
}

// upstreamAnswer is an upstream's answer to a request, and the status the
// client must get for it.
type upstreamAnswer struct {
	name   string
	answer func(c net.Conn)
	want   int
}

// upstreamAnswers are the answers every way of the proxy must survive,
// with an upstream timeout of timeout: a stalled upstream gets 504; one
// that never ends its header, sends more than five informational
// responses, switches protocols unasked, answers garbage or a status
// below 100 gets 502. A header under the limit but larger than a
// connection's buffer, and five informational responses, pass.
func upstreamAnswers(timeout time.Duration) []upstreamAnswer {
	return []upstreamAnswer{
		{"stall", func(c net.Conn) { time.Sleep(3 * timeout) }, http.StatusGatewayTimeout},
		{"endless header", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-Fill: " + strings.Repeat("a", 1000) + "\r\n"
			for range 2000 { // 2 MB, more than the 1 MiB allowed
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		}, http.StatusBadGateway},
		{"large header", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-Fill: " + strings.Repeat("a", 1000) + "\r\n"
			for range 500 { // 500 KB, less than the 1 MiB allowed
				io.WriteString(c, line)
			}
			io.WriteString(c, "Content-Length: 2\r\n\r\nok")
		}, http.StatusOK},
		{"five 1xx", func(c net.Conn) {
			for range 5 {
				io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
			}
			io.WriteString(c, okResponse)
		}, http.StatusOK},
		{"1xx flood", func(c net.Conn) {
			for range 6 {
				io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}, http.StatusBadGateway},
		{"unasked switch", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		}, http.StatusBadGateway},
		{"garbage", func(c net.Conn) { io.WriteString(c, "NOT HTTP\r\n\r\n") }, http.StatusBadGateway},
		{"status 99", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 099 Odd\r\n\r\n")
			// The proxy must close the connection, not leave it open.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				panic(fmt.Sprintf("after a status of 99 the upstream read %v, want EOF: the proxy left the connection open", err))
			}
		}, http.StatusBadGateway},
	}
}

// TestDirectUpstreamFailures: each of upstreamAnswers gets its status,
// failures with a problem document.
func TestDirectUpstreamFailures(t *testing.T) {
	for _, tt := range upstreamAnswers(time.Second) {
		t.Run(tt.name, func(t *testing.T) {
			up := oneShotUpstream(t, func(c net.Conn, _ *bufio.Reader) { tt.answer(c) })
			srv := testProxy(t, up, true, false, time.Second)
			res, err := http.Get(srv.URL + "/x")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			switch {
			case res.StatusCode != tt.want:
				t.Errorf("%d %s, want %d", res.StatusCode, body, tt.want)
			case tt.want != http.StatusOK && res.Header.Get("Content-Type") != "application/problem+json":
				t.Errorf("%d %q %s, want a problem document", res.StatusCode, res.Header.Get("Content-Type"), body)
			case tt.want == http.StatusOK && string(body) != "ok":
				t.Errorf("body %q, want ok", body)
			}
		})
	}
}

// TestDirectCutsATruncatedBody: a body the upstream ends early reaches the
// client as an error, not as a shorter response that looks whole.
func TestDirectCutsATruncatedBody(t *testing.T) {
	for name, answer := range map[string]string{
		"length":  "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b",
		"chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			up := oneShotUpstream(t, func(c net.Conn, _ *bufio.Reader) { io.WriteString(c, answer) })
			srv := testProxy(t, up, true, false, 5*time.Second)
			res, err := http.Get(srv.URL + "/x")
			if err != nil {
				return // cut before the header: also not whole
			}
			_, err = io.ReadAll(res.Body)
			res.Body.Close()
			if err == nil {
				t.Errorf("the client read a whole body; want an error")
			}
		})
	}
}

// TestDirectClientLeavingEndsTheWait: when the client goes away, the
// request to a stalled upstream is abandoned at once, not after the
// upstream timeout.
func TestDirectClientLeavingEndsTheWait(t *testing.T) {
	closed := make(chan struct{})
	up := oneShotUpstream(t, func(c net.Conn, br *bufio.Reader) {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		br.ReadByte() // returns when the proxy closes its side
		close(closed)
	})
	srv := testProxy(t, up, true, false, time.Minute)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(100 * time.Millisecond)
	c.Close()
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("the upstream connection stayed open after the client left")
	}
}

// earlyHintsUpstream answers one request with a 103 and then 200 ok.
func earlyHintsUpstream(t *testing.T) string {
	return oneShotUpstream(t, func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
}

// checkEarlyHints asks the proxy at addr for /x, whose upstream is
// earlyHintsUpstream: the 103 must come first, with the Link field (link,
// or any when link is empty) and without the fields set before the proxy
// ran, then the 200 with those fields and without Link.
func checkEarlyHints(t *testing.T, addr, link string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	req, _ := http.NewRequest(http.MethodGet, "/x", nil)
	hints, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	got := hints.Header.Get("Link")
	if hints.StatusCode != http.StatusEarlyHints || got == "" || link != "" && got != link || hints.Header.Get("X-Rate") != "" {
		t.Fatalf("first response %d %v, want 103 with Link and without X-Rate", hints.StatusCode, hints.Header)
	}
	res, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Rate") != "limiter" || res.Header.Get("Link") != "" {
		t.Errorf("final response %d %v, want 200 with X-Rate and without Link", res.StatusCode, res.Header)
	}
}

// TestDirectForwardsEarlyHints: a 103 reaches the client with the
// upstream's fields only, and the final response keeps the fields set
// before the proxy ran.
func TestDirectForwardsEarlyHints(t *testing.T) {
	srv := testProxy(t, earlyHintsUpstream(t), true, false, 5*time.Second)
	checkEarlyHints(t, srv.Listener.Addr().String(), "")
}

// TestDirectEligible: what takes the direct way.
func TestDirectEligible(t *testing.T) {
	p := &directProxy{}
	for _, tt := range []struct {
		raw  string
		want bool
	}{
		{"GET /x HTTP/1.1\r\nHost: a\r\n\r\n", true},
		{"HEAD /x?a=%41 HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, , keep-alive\r\n\r\n", true},
		{"GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false},
		{"GET /x HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n", false},
		{"GET /x?%4 HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"GET /x?a;b HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"GET http://a/x HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"GET /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
		{"PUT /x HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"GET /x HTTP/1.1\r\nHost: a\r\nTe: trailers\r\n\r\n", false},
	} {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tt.raw)))
		if err != nil {
			t.Fatal(err)
		}
		if r.ContentLength == 0 && r.Body != nil && len(r.TransferEncoding) == 0 {
			r.Body = http.NoBody // as the server hands it over
		}
		if got := p.eligible(r); got != tt.want {
			t.Errorf("eligible(%q) = %v, want %v", strings.SplitN(tt.raw, "\r\n", 2)[0], got, tt.want)
		}
	}
}

// TestNewDirectRefusesWhatItCannotJoin: an upstream URL with a path, a
// query or TLS goes through the ReverseProxy.
func TestNewDirectRefusesWhatItCannotJoin(t *testing.T) {
	for raw, want := range map[string]bool{
		"http://a:8080": true, "http://a/": true, "http://a": true,
		"https://a": false, "http://a/api": false, "http://a/?k=v": false, "http://u:p@a/": false,
	} {
		u, _ := url.Parse(raw)
		p := newDirect(u, http.DefaultTransport.(*http.Transport), &net.Dialer{Timeout: time.Second}, time.Second, nil, nil)
		if (p != nil) != want {
			t.Errorf("newDirect(%s) = %v, want direct %v", raw, p, want)
		}
		if p != nil {
			if raw == "http://a" && p.pool.addr != "a:80" {
				t.Errorf("newDirect(%s): dials %s, want a:80", raw, p.pool.addr)
			}
			p.pool.close()
		}
	}
}

// TestDirectSlowReaderFreesTheUpstream: a client that stops reading a
// large response is cut at the server's write timeout, and the upstream
// connection is closed with it, not kept waiting or pooled half-read.
func TestDirectSlowReaderFreesTheUpstream(t *testing.T) {
	cut := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 256 { // 256 MiB, far more than the sockets buffer
			if _, err := w.Write(chunk); err != nil {
				close(cut)
				return
			}
		}
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	lim, err := httplimit.New([]httplimit.Rule{{Name: "any", LimitKeys: []string{"ip:address"}, Rate: 1, Burst: 1}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	logs := logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute)
	h, closeProxy := buildProxy(u, &settings.HTTP{UpstreamTimeout: 5 * time.Second}, lim, metrics.New(), logs, true)
	defer closeProxy()
	front := httptest.NewUnstartedServer(h)
	front.Config.WriteTimeout = time.Second
	front.Config.ErrorLog = log.New(io.Discard, "", 0)
	front.Start()
	defer front.Close()
	c, err := net.Dial("tcp", front.Listener.Addr().String())
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
}

// TestDirectDropsAConnectionWithBytesUnasked: an upstream that sends more
// than the response it was asked for does not get its extra bytes read as
// the answer to the next client's request.
func TestDirectDropsAConnectionWithBytesUnasked(t *testing.T) {
	up := scriptedUpstream(t, func(c net.Conn, i int) bool {
		if i == 0 {
			io.WriteString(c, okResponse+"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
		} else {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
		}
		return true
	})
	srv := testProxy(t, up, true, false, 5*time.Second)
	for i := range 2 {
		if _, body := getBody(t, srv.URL+"/x"); body != "ok" {
			t.Fatalf("request %d got %q, want ok: another request's answer", i, body)
		}
	}
}

// TestDirectDropsAConnectionTheUpstreamSpokeOn: bytes an upstream sends on
// a connection while it waits idle in the pool are noticed before the
// connection is used again, and never reach the next client.
func TestDirectDropsAConnectionTheUpstreamSpokeOn(t *testing.T) {
	up := scriptedUpstream(t, func(c net.Conn, i int) bool {
		io.WriteString(c, okResponse)
		if i == 0 {
			time.Sleep(50 * time.Millisecond)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
		}
		return true
	})
	srv := testProxy(t, up, true, false, 5*time.Second)
	for i := range 2 {
		if _, body := getBody(t, srv.URL+"/x"); body != "ok" {
			t.Fatalf("request %d got %q, want ok: bytes the upstream sent unasked", i, body)
		}
		time.Sleep(300 * time.Millisecond) // the unasked bytes arrive meanwhile
	}
}

// TestDirectRetriesWhenTheUpstreamHangsUp: an upstream that reads a
// request on a reused connection and closes it without an answer (it was
// closing the connection as the request arrived) gets the request again on
// a new connection; the client never sees the 502.
func TestDirectRetriesWhenTheUpstreamHangsUp(t *testing.T) {
	up := scriptedUpstream(t, func(c net.Conn, i int) bool {
		if i == 0 {
			io.WriteString(c, okResponse)
		}
		return i == 0 // the second request is read, and left unanswered
	})
	srv := testProxy(t, up, true, false, 5*time.Second)
	for i := range 4 {
		if status, body := getBody(t, srv.URL+"/x"); status != http.StatusOK || body != "ok" {
			t.Fatalf("request %d: %d %q, want 200 ok", i, status, body)
		}
	}
}

// TestStreaming: a response is flushed as it comes when its length is
// unknown or it is server-sent events, as the ReverseProxy decides (its
// test of the media type is the model).
func TestStreaming(t *testing.T) {
	for _, ct := range []string{"", "text/event-stream", "Text/Event-Stream; charset=utf-8", " text/event-stream",
		"text/event-stream ;x=1", "text/event-streamx", "text/event-strea", "text/plain", "text/event-stream; bad", "TEXT/EVENT-STREAM\t"} {
		base, _, _ := mime.ParseMediaType(ct)
		for _, length := range []int64{-1, 0, 10} {
			res := &http.Response{ContentLength: length, Header: http.Header{"Content-Type": {ct}}}
			want := length == -1 || base == "text/event-stream"
			if got := streaming(res); got != want {
				t.Errorf("streaming(Content-Type %q, length %d) = %v, want %v", ct, length, got, want)
			}
		}
	}
}
