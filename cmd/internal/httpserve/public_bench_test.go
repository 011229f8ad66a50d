package httpserve

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/valyala/fasthttp"
)

// benchWriter is a ResponseWriter that keeps nothing but the status, so
// that a benchmark counts the handler's allocations, not a recorder's.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(s int)   { w.status = s }
func (w *benchWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

// rawUpstream is an upstream on loopback that answers every request on a
// connection with a fixed 200, allocating nothing per request, so that
// the allocations a benchmark counts are the proxy's alone.
func rawUpstream(b *testing.B) *url.URL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.Cleanup(func() { c.Close() })
			go func() {
				buf := make([]byte, 8192)
				n := 0
				for {
					m, err := c.Read(buf[n:])
					if err != nil {
						return
					}
					n += m
					// Requests without a body: each ends at a blank line.
					for {
						end := bytes.Index(buf[:n], []byte("\r\n\r\n"))
						if end < 0 {
							break
						}
						if _, err := c.Write(answer); err != nil {
							return
						}
						n = copy(buf, buf[end+4:n])
					}
					if n == len(buf) {
						return
					}
				}
			}()
		}
	}()
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// BenchmarkPublic is serve's handler (the limiter in front of the proxy)
// on one request, without the HTTP server around it, against an upstream
// on loopback: way=direct and way=reverse proxy an admitted GET the two
// ways, way=deny answers a 429 from the built-in rule's shape. Its
// allocations per request are the handler's own; the server's come on
// top, the same for every way.
func BenchmarkPublic(b *testing.B) {
	u := rawUpstream(b)
	logs := logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute)
	for _, bc := range []struct {
		name       string
		direct     bool
		rate, size float64
		want       int
	}{
		{"way=direct", true, 1e6, 1e6, http.StatusOK},
		{"way=reverse", false, 1e6, 1e6, http.StatusOK},
		{"way=deny", true, 5, 10, http.StatusTooManyRequests},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lim, err := httplimit.New([]httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: bc.rate, Burst: bc.size}}, httplimit.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			proxy, closeProxy := buildProxy(u, &settings.HTTP{UpstreamTimeout: 5 * time.Second}, lim, metrics.New(), logs, bc.direct)
			defer closeProxy()
			h := lim.Handler(proxy)
			// Origin form, as a server hands a request over.
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			r.Host = "front.example"
			r.RemoteAddr = "192.0.2.1:1234"
			w := &benchWriter{h: http.Header{}}
			serve := func() {
				clear(w.h)
				w.status = 0
				h.ServeHTTP(w, r)
			}
			for range 20 { // spend the deny rule's burst, warm the pool
				serve()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				serve()
			}
			if w.status != bc.want {
				b.Fatalf("status %d, want %d", w.status, bc.want)
			}
		})
	}
}

// BenchmarkFastProxy is the fasthttp proxy on one admitted GET, without
// the server around it, against an upstream on loopback: the request as
// the server hands it over, the response written as the server writes it
// (to nothing). Its allocations per request are the proxy's own.
func BenchmarkFastProxy(b *testing.B) {
	u := rawUpstream(b)
	logs := logthrottle.NewSet(slog.NewTextHandler(io.Discard, nil), time.Minute)
	p, closeProxy := newFastProxy(u, &settings.HTTP{UpstreamTimeout: 5 * time.Second}, metrics.New(), logs)
	defer closeProxy()
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(new(fasthttp.Request), &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, nil)
	raw := "GET /x HTTP/1.1\r\nHost: front.example\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"
	if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	fields := http.Header{"X-Rate": {"limiter"}}
	w := bufio.NewWriter(io.Discard)
	serve := func() {
		ctx.Response.Reset()
		p.serve(ctx, fields, false, nil)
		if err := ctx.Response.Write(w); err != nil {
			b.Fatal(err)
		}
		w.Flush()
	}
	for range 20 { // warm the pools
		serve()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		serve()
	}
	if s := ctx.Response.StatusCode(); s != http.StatusOK {
		b.Fatalf("status %d, want 200", s)
	}
}
