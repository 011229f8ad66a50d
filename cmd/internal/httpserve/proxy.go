package httpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
)

// newProxy is a reverse proxy to u that tells it the client's address in
// X-Forwarded-For: appended to the incoming header when the request comes
// from a trusted proxy, replacing it otherwise (a client's own header is
// not passed on as if it were true). It returns the handler and a
// function that closes its idle upstream connections.
//
// Every step of reaching the upstream is bounded by --upstream-timeout:
// connecting, the TLS handshake, and the wait for the response header after
// the request was sent. A stalled upstream gets 504, any other failure 502,
// each with a problem document that names no address.
//
// Requests that would switch protocols pass the gate of tunnels first.
// Those without a body go the direct way when the upstream allows it
// (directProxy); the others through httputil.ReverseProxy.
func newProxy(u *url.URL, f *settings.HTTP, lim *httplimit.Middleware, m *metrics.Metrics, logs *logthrottle.Set) (http.Handler, func()) {
	return buildProxy(u, f, lim, m, logs, true)
}

// buildProxy is newProxy, with the direct way only if direct is set: the
// tests compare the two ways.
func buildProxy(u *url.URL, f *settings.HTTP, lim *httplimit.Middleware, m *metrics.Metrics, logs *logthrottle.Set, direct bool) (http.Handler, func()) {
	tunnels := newTunnels(f, m)
	rp, t, dialer, fail := reverseProxy(u, f, lim, m, logs, tunnels)
	var dp *directProxy
	if direct {
		dp = newDirect(u, t, dialer, f.UpstreamTimeout, lim.FromTrustedProxy, fail)
	}
	if dp == nil {
		return tunnels.gate(rp), t.CloseIdleConnections
	}
	return tunnels.gate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dp.eligible(r) {
			dp.ServeHTTP(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	})), func() { dp.pool.close(); t.CloseIdleConnections() }
}

// reverseProxy is the httputil.ReverseProxy to u, whose 101 answers open
// the tunnels of tunnels, with its transport, the transport's dialer and
// its answer to a failed request.
func reverseProxy(u *url.URL, f *settings.HTTP, lim *httplimit.Middleware, m *metrics.Metrics, logs *logthrottle.Set, tunnels *tunnels) (*httputil.ReverseProxy, *http.Transport, *net.Dialer, func(http.ResponseWriter, *http.Request, error)) {
	d := f.UpstreamTimeout
	t := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: d, KeepAlive: 30 * time.Second}
	t.DialContext = dialer.DialContext
	t.TLSHandshakeTimeout = d
	t.ResponseHeaderTimeout = d
	t.MaxIdleConns = maxIdleUpstreamConns
	t.MaxIdleConnsPerHost = maxIdleUpstreamConns
	t.MaxResponseHeaderBytes = maxResponseHeaderBytes
	fail := upstreamFailure(d, m, logs)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			if lim.FromTrustedProxy(pr.In) {
				pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			}
			pr.SetXForwarded()
			if pr.Out.Body != nil {
				pr.Out.Body = &clientBody{ReadCloser: pr.Out.Body}
			}
		},
		ModifyResponse: tunnels.modifyResponse,
		Transport:      t,
		BufferPool:     copyBuffers{},
		ErrorHandler:   fail,
		ErrorLog:       logs.ErrorLog("proxy"),
	}
	return rp, t, dialer, fail
}

// upstreamFailure returns the answer to a request the upstream failed: a
// problem document, 504 for a timeout and 502 otherwise, counted and
// logged; 400 or 408 when it was the client that failed to send its body;
// a bare 502 when the client is gone.
func upstreamFailure(d time.Duration, m *metrics.Metrics, logs *logthrottle.Set) func(http.ResponseWriter, *http.Request, error) {
	upstreamLog := logs.Logger("upstream")
	return func(w http.ResponseWriter, r *http.Request, err error) {
		if b, ok := r.Body.(*clientBody); ok && b.failed() != nil {
			// The client failed to send its body (--read-timeout, or
			// a broken connection): not the upstream's fault.
			writeProblem(w, clientBodyStatus(b.failed()), bodyFailedDetail)
			return
		}
		if r.Context().Err() != nil {
			// The client is gone; nobody reads the answer.
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		status, detail := upstreamProblem(err, d)
		m.UpstreamErrors.WithLabelValues(strconv.Itoa(status)).Inc()
		upstreamLog.Warn("upstream failed", "status", status, "method", r.Method, "err", err)
		writeProblem(w, status, detail)
	}
}

// bodyFailedDetail is the problem's detail when the client failed to
// send its body (--read-timeout, or a broken connection): not the
// upstream's fault.
const bodyFailedDetail = "The request body did not arrive in full."

// clientBodyStatus is the status of a request whose body failed to
// arrive with err: 408 for a timeout, 400 otherwise.
func clientBodyStatus(err error) int {
	if isTimeout(err) {
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// upstreamProblem is the status and detail of a request the upstream
// failed with err, with d the upstream timeout: 504 for a timeout, 502
// otherwise; the detail names no address.
func upstreamProblem(err error, d time.Duration) (int, string) {
	if isTimeout(err) {
		return http.StatusGatewayTimeout, fmt.Sprintf("The upstream server did not answer within %v.", d)
	}
	return http.StatusBadGateway, "The upstream server could not be reached, or did not answer with a valid response."
}

// copyBufferSize is the size of the buffers a proxied response's body is
// copied through: ReverseProxy's own default.
const copyBufferSize = 32 << 10

// copyBufferPool holds the buffers as array pointers, so that putting one
// back allocates nothing.
var copyBufferPool = sync.Pool{New: func() any { return new([copyBufferSize]byte) }}

// copyBuffers reuses the buffers a proxied response's body is copied
// through: without a pool, ReverseProxy allocates and zeroes 32 KiB per
// request, which was a tenth of the proxy's CPU per request.
type copyBuffers struct{}

func (copyBuffers) Get() []byte { return copyBufferPool.Get().(*[copyBufferSize]byte)[:] }

func (copyBuffers) Put(b []byte) {
	if len(b) == copyBufferSize {
		copyBufferPool.Put((*[copyBufferSize]byte)(b))
	}
}

// isTimeout tells a deadline that passed from other errors.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// clientBody is a proxied request's body, which remembers whether reading
// it from the client failed: the transport reports that failure as its
// own, and a client's read timeout must not pass for a stalled upstream.
type clientBody struct {
	io.ReadCloser
	// err is the error of reading from the client. The transport reads on
	// a goroutine of its own, which may still run when it gives up.
	err atomic.Pointer[error]
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.err.Store(&err)
	}
	return n, err
}

// failed returns the error reading the body from the client, if any.
func (b *clientBody) failed() error {
	if p := b.err.Load(); p != nil {
		return *p
	}
	return nil
}

// writeProblem answers with status and an RFC 9457 problem document whose
// detail is said to the client as it is.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(problemBody(status, detail))
}

// problemBody is the problem document of status with detail, ending in a
// newline: the body both engines answer a failure with.
func problemBody(status int, detail string) []byte {
	body, _ := json.Marshal(&httplimit.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
	return append(body, '\n')
}
