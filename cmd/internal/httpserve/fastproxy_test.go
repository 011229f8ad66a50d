package httpserve

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/valyala/fasthttp"
)

// quietLogger is a fasthttp.Logger that says nothing.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// testFastProxy serves newFastProxy's proxy on loopback with a
// fasthttp.Server configured as serve's, behind a handler that sets a
// field first as the limiter does; it returns the address and the
// metrics. tweak, if not nil, changes the server before it starts.
func testFastProxy(t *testing.T, upstream string, trusted bool, timeout time.Duration, tweak func(*fasthttp.Server)) (string, *metrics.Metrics) {
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
			p.serve(ctx, http.Header{"X-Rate": {"limiter"}}, trusted)
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
		tweak(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(); closeProxy() })
	return ln.Addr().String(), m
}

// TestFastProxyMatchesReverseProxy: for requests of every shape, the
// upstream receives the same request and the client the same response
// through the fasthttp proxy as through httputil.ReverseProxy, but for
// the differences listed in fastDifferences.
func TestFastProxyMatchesReverseProxy(t *testing.T) {
	rec := &recordingUpstream{}
	up := httptest.NewServer(rec)
	defer up.Close()
	for _, trusted := range []bool{false, true} {
		fast, _ := testFastProxy(t, up.URL, trusted, 5*time.Second, nil)
		reverse := testProxy(t, up.URL, false, trusted, 5*time.Second)
		for _, c := range proxyShapes {
			reqs := []string{c.raw, c.raw}
			gotF := rawExchange(t, fast, reqs)
			seenF := rec.take()
			gotR := rawExchange(t, reverse.Listener.Addr().String(), reqs)
			seenR := rec.take()
			name := fmt.Sprintf("trusted=%v %.60q", trusted, strings.SplitN(c.raw, "\r\n", 2)[0])
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
				if !reflect.DeepEqual(f, r) {
					t.Errorf("%s: upstream saw\n fast    %+v\n reverse %+v", name, f, r)
				}
			}
		}
	}
}
