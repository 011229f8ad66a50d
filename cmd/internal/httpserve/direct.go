package httpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// directProxy forwards the requests most traffic is made of (GET, HEAD or
// OPTIONS, without a body) on pooled upstream connections, writing the
// request and reading the response on the goroutine that serves the
// client. httputil.ReverseProxy's transport hands every request to two
// goroutines of its own per upstream connection, and clones the request
// first; skipping both is a quarter of the proxy's CPU per request.
//
// What reaches the upstream is what the ReverseProxy would send, header
// for header, except that no Accept-Encoding is added: the transport asks
// for gzip on its own and decompresses the answer, where this passes the
// client's own choice through. Every other request, and every upstream
// this cannot serve (https, a path or query in the URL), goes to the
// ReverseProxy.
type directProxy struct {
	pool *upstreamPool
	// host is the Host header sent: the upstream URL's.
	host string
	// timeout bounds the wait for the response header, as
	// --upstream-timeout bounds the transport's.
	timeout time.Duration
	// trusted reports whether the request comes from a trusted proxy,
	// whose X-Forwarded-For is passed on.
	trusted func(*http.Request) bool
	// fail answers an upstream failure: 502 or 504.
	fail func(http.ResponseWriter, *http.Request, error)
}

// Limits of a response from the upstream.
const (
	// maxResponseHeaderBytes bounds a response header, as net/http's
	// server bounds a request header: an upstream that never ends its
	// header gets 502, not the proxy's memory.
	maxResponseHeaderBytes = 1 << 20
	// max1xxResponses bounds the informational responses before the
	// final one, as net/http's transport does.
	max1xxResponses = 5
	// maxIdleUpstreamConns bounds the idle upstream connections kept.
	maxIdleUpstreamConns = 1024
)

var (
	errResponseHeaderTooLarge = errors.New("upstream response header larger than 1 MiB")
	errTooMany1xx             = errors.New("upstream sent more than 5 informational responses")
	errUnaskedSwitch          = errors.New("upstream switched protocols unasked")
)

// newDirect returns the direct proxy to u, or nil when u is not a plain
// http:// URL without a path, query or user: those go through the
// ReverseProxy, which joins paths and queries. Its connections are dialed
// by dialer and kept idle as t keeps its own; timeout bounds the wait for
// a response header.
func newDirect(u *url.URL, t *http.Transport, dialer *net.Dialer, timeout time.Duration, trusted func(*http.Request) bool, fail func(http.ResponseWriter, *http.Request, error)) *directProxy {
	if u.Scheme != "http" || (u.Path != "" && u.Path != "/") || u.RawPath != "" || u.RawQuery != "" || u.ForceQuery || u.User != nil || u.Opaque != "" {
		return nil
	}
	if strings.Contains(os.Getenv("GODEBUG"), "urlmaxqueryparams=") {
		// The ReverseProxy then rewrites every query; so must serve.
		return nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &directProxy{
		pool:    newUpstreamPool(addr, dialer, t.MaxIdleConnsPerHost, t.IdleConnTimeout),
		host:    u.Host,
		timeout: timeout,
		trusted: trusted,
		fail:    fail,
	}
}

// eligible reports whether r can be forwarded directly: a method without
// a body, no body, an origin-form target with a query the ReverseProxy
// would pass as it is, and no hop-by-hop field the ReverseProxy would act
// on (Connection naming other fields, TE).
func (p *directProxy) eligible(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	if r.ContentLength != 0 || (r.Body != nil && r.Body != http.NoBody) || len(r.TransferEncoding) != 0 || r.Trailer != nil {
		return false
	}
	if r.URL.Opaque != "" || r.URL.Host != "" || !strings.HasPrefix(r.URL.Path, "/") || !plainQuery(r.URL.RawQuery) {
		return false
	}
	h := r.Header
	if _, ok := h["Te"]; ok {
		return false
	}
	for _, v := range h["Connection"] {
		if !onlyKeepAlive(v) {
			return false
		}
	}
	return true
}

// onlyKeepAlive reports whether a Connection field value names no field
// but Keep-Alive, which is never forwarded anyway.
func onlyKeepAlive(v string) bool {
	for v != "" {
		var tok string
		tok, v, _ = strings.Cut(v, ",")
		if tok = strings.TrimSpace(tok); tok != "" && !strings.EqualFold(tok, "keep-alive") {
			return false
		}
	}
	return true
}

// maxQueryParams is the most parameters url.ParseQuery reads; the
// ReverseProxy rewrites a query with more.
const maxQueryParams = 10000

// plainQuery reports whether a raw query is one the ReverseProxy forwards
// unchanged: it rewrites those url.ParseQuery rejects (a semicolon, a %
// not followed by two hex digits, more than maxQueryParams parameters).
func plainQuery(q string) bool {
	params := 1
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case '&':
			if params++; params > maxQueryParams {
				return false
			}
		case ';':
			return false
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// ServeHTTP forwards an eligible request.
func (p *directProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	uc, err := p.pool.get(ctx)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	// Whatever ends the request but a clean answer, a panic included,
	// closes the connection: only one read to its end is reused.
	kept := false
	defer func() {
		if !kept {
			uc.Close()
		}
	}()
	res, stop, err := p.exchange(ctx, uc, w, r)
	if err != nil && uc.reused && ctx.Err() == nil && idleClosed(err) {
		// The upstream closed the connection before it answered: the
		// request is safe to send again, on a new one.
		uc.Close()
		fresh, derr := p.pool.dial(ctx)
		if derr != nil {
			p.fail(w, r, derr)
			return
		}
		uc = fresh
		res, stop, err = p.exchange(ctx, uc, w, r)
	}
	if err != nil {
		p.fail(w, r, err)
		return
	}
	if !p.respond(w, res) {
		stop()
		// Half a response was sent: only cutting the connection tells
		// the client it is not whole.
		panic(http.ErrAbortHandler)
	}
	// Bytes past the response's end were sent unasked: kept, they would
	// be read as the answer to the next client's request. (Bytes that
	// arrive later are caught by the pool's check before reuse; ones
	// that arrive after it, while the next request is written, cannot be
	// told from its answer, as with any HTTP/1.1 connection reuse.)
	if !stop() || res.Close || uc.br.Buffered() > 0 {
		return
	}
	kept = true
	p.pool.put(uc)
}

// exchange sends r on uc and reads the final response header, forwarding
// informational responses to w. While it waits, the client leaving cuts
// the wait short; stop ends that watch, and reports false if it fired,
// after which uc must not be reused.
func (p *directProxy) exchange(ctx context.Context, uc *upstreamConn, w http.ResponseWriter, r *http.Request) (*http.Response, func() bool, error) {
	stop := context.AfterFunc(ctx, func() { uc.SetDeadline(time.Unix(1, 0)) })
	res, err := p.roundTrip(uc, w, r)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return res, stop, nil
}

// roundTrip writes the request and reads the response header, within the
// upstream timeout.
func (p *directProxy) roundTrip(uc *upstreamConn, w http.ResponseWriter, r *http.Request) (*http.Response, error) {
	uc.SetDeadline(time.Now().Add(p.timeout))
	p.writeRequest(uc, r)
	if err := uc.bw.Flush(); err != nil {
		return nil, sendError{err}
	}
	uc.headerLeft = maxResponseHeaderBytes
	if _, err := uc.br.Peek(1); err != nil {
		if isTimeout(err) {
			return nil, errHeaderTimeout{}
		}
		return nil, sendError{err}
	}
	res, err := http.ReadResponse(uc.br, r)
	for n := 0; err == nil && res.StatusCode < 200; n++ {
		switch {
		case res.StatusCode < 100:
			return nil, fmt.Errorf("upstream answered with status %d", res.StatusCode)
		case res.StatusCode == http.StatusSwitchingProtocols:
			return nil, errUnaskedSwitch
		}
		if n == max1xxResponses {
			return nil, errTooMany1xx
		}
		forward1xx(w, res)
		uc.headerLeft = maxResponseHeaderBytes
		res, err = http.ReadResponse(uc.br, r)
	}
	if err != nil {
		switch {
		case uc.headerLeft == 0:
			err = errResponseHeaderTooLarge
		case isTimeout(err):
			err = errHeaderTimeout{}
		}
		return nil, err
	}
	uc.headerLeft = -1
	uc.SetDeadline(time.Time{})
	return res, nil
}

// errHeaderTimeout is the wait for a response header that reached the
// upstream timeout, told as net/http's transport tells it.
type errHeaderTimeout struct{}

func (errHeaderTimeout) Error() string   { return "timeout awaiting response headers" }
func (errHeaderTimeout) Timeout() bool   { return true }
func (errHeaderTimeout) Temporary() bool { return true }

// sendError is a failure before the first byte of the response arrived.
type sendError struct{ err error }

func (e sendError) Error() string { return e.err.Error() }
func (e sendError) Unwrap() error { return e.err }

// idleClosed reports whether err says that the upstream closed a
// connection before answering on it: the end of the stream or a reset,
// before any byte of a response, and not a timeout.
func idleClosed(err error) bool {
	var s sendError
	if !errors.As(err, &s) || isTimeout(err) {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// forwardedExclude names the fields of a request that are not copied as
// they are: hop-by-hop ones, those written from the request itself (Host,
// User-Agent, the body's framing), and the forwarding ones, which the
// proxy writes from what it knows.
var forwardedExclude = func() map[string]bool {
	m := map[string]bool{"Host": true, "User-Agent": true, "Content-Length": true,
		"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true}
	for _, k := range hopByHop {
		m[k] = true
	}
	return m
}()

// writeRequest writes r's request line and header to uc's buffer: r's
// target, the upstream's Host, r's fields but the excluded ones, and the
// forwarding fields, X-Forwarded-For extending a trusted proxy's.
func (p *directProxy) writeRequest(uc *upstreamConn, r *http.Request) {
	bw := uc.bw
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.URL.EscapedPath())
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		bw.WriteByte('?')
		bw.WriteString(r.URL.RawQuery)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(p.host)
	bw.WriteString("\r\n")
	if ua := r.Header["User-Agent"]; len(ua) > 0 && ua[0] != "" {
		bw.WriteString("User-Agent: ")
		bw.WriteString(ua[0])
		bw.WriteString("\r\n")
	}
	r.Header.WriteSubset(bw, forwardedExclude)
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		bw.WriteString("X-Forwarded-For: ")
		if p.trusted(r) {
			for _, v := range r.Header["X-Forwarded-For"] {
				bw.WriteString(v)
				bw.WriteString(", ")
			}
		}
		bw.WriteString(ip)
		bw.WriteString("\r\n")
	}
	if r.Host != "" {
		bw.WriteString("X-Forwarded-Host: ")
		bw.WriteString(r.Host)
		bw.WriteString("\r\n")
	}
	if r.TLS != nil {
		bw.WriteString("X-Forwarded-Proto: https\r\n\r\n")
	} else {
		bw.WriteString("X-Forwarded-Proto: http\r\n\r\n")
	}
}

// forward1xx sends an informational response to the client with the
// upstream's fields only, keeping the fields already set for the final
// response (the rate-limit ones).
func forward1xx(w http.ResponseWriter, res *http.Response) {
	if res.StatusCode == http.StatusContinue {
		return // net/http's server answers Expect itself
	}
	h := w.Header()
	kept := h.Clone()
	clear(h)
	copyHeader(h, res.Header)
	w.WriteHeader(res.StatusCode)
	clear(h)
	copyHeader(h, kept)
}

// respond writes the response to w: its fields but the hop-by-hop ones
// added to those already set, its status, its body, flushed as it comes
// when it is a stream, and its trailers. It reports false if the body
// could not be copied in full.
func (p *directProxy) respond(w http.ResponseWriter, res *http.Response) bool {
	removeHopByHop(res.Header)
	h := w.Header()
	copyHeader(h, res.Header)
	if len(res.Trailer) > 0 {
		keys := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h["Trailer"] = append(h["Trailer"], strings.Join(keys, ", "))
	}
	w.WriteHeader(res.StatusCode)
	if res.Body != http.NoBody {
		var flush func() error
		if streaming(res) {
			flush = http.NewResponseController(w).Flush
		}
		buf := copyBufferPool.Get().(*[copyBufferSize]byte)
		err := copyBody(w, res.Body, buf[:], flush)
		copyBufferPool.Put(buf)
		if err != nil {
			res.Body.Close()
			return false
		}
	}
	res.Body.Close()
	for k, vv := range res.Trailer {
		h[http.TrailerPrefix+k] = append(h[http.TrailerPrefix+k], vv...)
	}
	return true
}

// streaming reports whether a response is passed on as it comes, each
// read flushed: server-sent events, and bodies of unknown length.
func streaming(res *http.Response) bool {
	if res.ContentLength == -1 {
		return true
	}
	const sse = "text/event-stream"
	ct := strings.TrimLeft(res.Header.Get("Content-Type"), " \t")
	if len(ct) < len(sse) || !strings.EqualFold(ct[:len(sse)], sse) {
		return false // without parsing, which allocates
	}
	base, _, _ := mime.ParseMediaType(ct)
	return base == sse
}

// copyBody copies src to w through buf, flushing after each write if
// flush is not nil. It returns the first error reading or writing; the
// end of src is not one.
func copyBody(w io.Writer, src io.Reader, buf []byte, flush func() error) error {
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if flush != nil {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// hopByHop names the fields that concern one connection only.
var hopByHop = [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopByHop deletes from h the hop-by-hop fields and those its
// Connection field names.
func removeHopByHop(h http.Header) {
	deleteConnectionListed(h)
	for _, k := range hopByHop {
		delete(h, k)
	}
}

// deleteConnectionListed deletes from h the fields its Connection field
// names, which concern one connection only.
func deleteConnectionListed(h http.Header) {
	for _, v := range h["Connection"] {
		for v != "" {
			var name string
			name, v, _ = strings.Cut(v, ",")
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
}

// copyHeader adds the values of src to dst.
func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		dst[k] = append(dst[k], vv...)
	}
}
