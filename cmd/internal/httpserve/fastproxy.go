package httpserve

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// fastProxy forwards requests received by a fasthttp.Server to the
// upstream, as newProxy's proxy does for net/http: the same request line
// and fields reach the upstream, the same answer the client, and the same
// failures get the same problem documents.
//
// A fasthttp.HostClient keeps the upstream connections (at most
// maxIdleUpstreamConns, in use or idle, each idle for at most the net/http
// transport's idle timeout), but the request is written and the response
// read here, on the goroutine serving the client: the client's own round
// trip bounds the whole response by its read timeout, streamed body
// included, reads no response header larger than its read buffer, and
// drops informational responses silently, where the proxy bounds only the
// wait for the header, allows a header of maxResponseHeaderBytes, and
// counts the informational responses.
type fastProxy struct {
	hc     *fasthttp.HostClient
	dialer *net.Dialer
	// tls is the configuration of an https upstream's connections.
	tls *tls.Config
	// host is the Host field sent: the upstream URL's.
	host string
	// prefix and query are the upstream URL's escaped path and raw query,
	// joined before the client's as httputil.ProxyRequest.SetURL joins
	// them.
	prefix, query string
	// reencode says that every query is re-encoded, as the ReverseProxy
	// does under GODEBUG's urlmaxqueryparams.
	reencode bool
	// timeout bounds connecting and the wait for the response header.
	timeout time.Duration

	gateway, gatewayTimeout prometheus.Counter
	log                     *slog.Logger
	exchanges               sync.Pool // of *fastExchange
}

// newFastProxy returns the proxy to u (http:// or https://, with an
// optional path and query to join the client's onto), with f's
// --upstream-timeout, and a function that closes its idle upstream
// connections.
func newFastProxy(u *url.URL, f *settings.HTTP, m *metrics.Metrics, logs *logthrottle.Set) (*fastProxy, func()) {
	d := f.UpstreamTimeout
	p := &fastProxy{
		dialer:         &net.Dialer{Timeout: d, KeepAlive: 30 * time.Second},
		host:           u.Host,
		prefix:         u.EscapedPath(),
		query:          u.RawQuery,
		reencode:       strings.Contains(os.Getenv("GODEBUG"), "urlmaxqueryparams="),
		timeout:        d,
		gateway:        m.UpstreamErrors.WithLabelValues(strconv.Itoa(http.StatusBadGateway)),
		gatewayTimeout: m.UpstreamErrors.WithLabelValues(strconv.Itoa(http.StatusGatewayTimeout)),
		log:            logs.Logger("upstream"),
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
		// The system's roots, and the name in the URL.
		p.tls = &tls.Config{ServerName: u.Hostname()}
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	p.hc = &fasthttp.HostClient{
		Addr: addr,
		Dial: p.dial,
		// Each client connection carries one request at a time, so
		// --max-conns of them never need more; beyond, a request waits
		// for a free one, at most the timeout.
		MaxConns:            upstreamConnCap(f.MaxConns),
		MaxConnWaitTimeout:  d,
		MaxIdleConnDuration: http.DefaultTransport.(*http.Transport).IdleConnTimeout,
		ConnPoolStrategy:    fasthttp.LIFO,
		ReadBufferSize:      upstreamBufferSize,
		WriteBufferSize:     upstreamBufferSize,
		// Unused by the proxy's own round trip; set for any other.
		DisablePathNormalizing:   true,
		NoDefaultUserAgentHeader: true,
		StreamResponseBody:       true,
	}
	p.exchanges.New = func() any { return &fastExchange{p: p} }
	return p, p.hc.CloseIdleConnections
}

// upstreamConnCap is the most upstream connections the proxy opens for
// maxConns client connections (0: unbounded), never fewer than the pool of
// idle ones net/http's transport keeps.
func upstreamConnCap(maxConns int) int {
	if maxConns <= 0 {
		return math.MaxInt32
	}
	return max(maxConns, maxIdleUpstreamConns)
}

// dial connects to the upstream, and does the TLS handshake of an https
// one, each within the timeout, as the transport's dialer and
// TLSHandshakeTimeout bound them.
func (p *fastProxy) dial(addr string) (net.Conn, error) {
	c, err := p.dialer.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if p.tls == nil {
		pc := &probedConn{Conn: c}
		pc.probe.init(c)
		return pc, nil
	}
	// A TLS connection is not probed while idle: its peer may send
	// session tickets unasked.
	tc := tls.Client(c, p.tls)
	c.SetDeadline(time.Now().Add(p.timeout))
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return tc, nil
}

// probedConn is a plain upstream connection with the probe that tells
// whether the upstream spoke on it while it was idle.
type probedConn struct {
	net.Conn
	probe idleProbe
}

// fastExchange is one request's way through the proxy: the upstream
// connection, its buffers and the upstream's response. It is the body
// stream given to the client's response, and goes back to the pool when
// the server closes it, after the body was written.
type fastExchange struct {
	p   *fastProxy
	ctx *fasthttp.RequestCtx
	// reqBody, if not nil, is what the request's body stream is read
	// through: the limiter's reader around it.
	reqBody io.Reader
	// after, if not nil, is called once the body was sent, or failed: the
	// limiter's release of the request's in-flight slots.
	after func()
	// cc is the HostClient's connection, whose type fasthttp does not
	// export (see connOf); conn is its net.Conn.
	cc   any
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	// big says that br is a reader of bigReaders, taken for a response
	// header larger than the connection's buffer.
	big bool
	// deadline is when the wait for the upstream ends: to take the body
	// being written, or to answer.
	deadline time.Time
	res      fasthttp.Response
	// body is the upstream's body; length its Content-Length, -1 when
	// chunked, -2 when it ends with the connection; read is how much of
	// it was read, eof whether its end was.
	body   io.Reader
	length int
	read   int
	eof    bool
	// listed holds the values of a Connection field being forwarded.
	listed [][]byte
	// key holds a field name in canonical form.
	key []byte
}

// canonical returns k in canonical form (as net/http writes names), in
// x.key: the server may pass names as received, and a client must not get
// a field past the proxy by spelling it in another case.
func (x *fastExchange) canonical(k []byte) []byte {
	x.key = append(x.key[:0], k...)
	upper := true
	for i, c := range x.key {
		switch {
		case upper && 'a' <= c && c <= 'z':
			x.key[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			x.key[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
	return x.key
}

// connOf recovers the HostClient's connection from an any: its type, which
// fasthttp does not export, is inferred from release's parameter.
func connOf[C any](v any, _ func(C)) C { return v.(C) }

// Errors of the client's side of a request.
type (
	// clientBodyError is a failure to read the client's body: 400, or
	// 408 on a timeout, never counted as the upstream's.
	clientBodyError struct{ err error }
	// errNoFreeConn is the wait for a free upstream connection that
	// reached the timeout: every allowed connection was busy.
	errNoFreeConn struct{}
)

func (e clientBodyError) Error() string { return "reading the request body: " + e.err.Error() }
func (e clientBodyError) Unwrap() error { return e.err }
func (errNoFreeConn) Error() string     { return "no free upstream connection within the timeout" }
func (errNoFreeConn) Timeout() bool     { return true }

// serve forwards ctx's request to the upstream and writes the upstream's
// answer to ctx.Response: fields first (the limiter's), then the upstream's
// own but the hop-by-hop ones. trusted says that the client is a trusted
// proxy, whose X-Forwarded-For is extended rather than replaced. A request
// carrying Upgrade must not reach serve: it forwards no upgrade. body, if
// not nil, is what the request's body stream is read through. It returns
// the exchange whose body the server streams once the handler returned,
// nil if none.
func (p *fastProxy) serve(ctx *fasthttp.RequestCtx, fields http.Header, trusted bool, body io.Reader) *fastExchange {
	x := p.exchanges.Get().(*fastExchange)
	x.ctx, x.reqBody = ctx, body
	copyFields(&ctx.Response.Header, fields)
	if err := x.roundTrip(trusted); err != nil {
		x.finish(false)
		p.fail(ctx, err)
		return nil
	}
	if !x.respond() {
		return nil
	}
	return x
}

// roundTrip sends the request and reads the final response header. A
// request safe to repeat (GET, HEAD, OPTIONS or TRACE without a body, as
// net/http's transport judges) that a reused connection failed before any
// byte of the answer is sent again, once, on another connection: the
// upstream closed it as the request arrived.
func (x *fastExchange) roundTrip(trusted bool) error {
	h := &x.ctx.Request.Header
	n := h.ContentLength()
	replayable := (n == 0 || n == -2) && (h.IsGet() || h.IsHead() || h.IsOptions() || h.IsTrace())
	for attempt := 0; ; attempt++ {
		reused, err := x.acquire()
		if err != nil {
			return err
		}
		err = x.exchange(trusted)
		if err == nil {
			return nil
		}
		var cb clientBodyError
		if !errors.As(err, &cb) && !time.Now().Before(x.deadline) {
			err = errHeaderTimeout{}
		}
		if attempt > 0 || !reused || !replayable || !idleClosed(err) {
			return err
		}
		x.release(false)
	}
}

// acquire takes an upstream connection, and reports whether it carried a
// request before. An idle one the upstream spoke on is closed instead.
func (x *fastExchange) acquire() (bool, error) {
	hc := x.p.hc
	for {
		cc, err := hc.AcquireConn(x.p.timeout, false)
		if err != nil {
			if errors.Is(err, fasthttp.ErrNoFreeConns) || errors.Is(err, fasthttp.ErrTimeout) {
				err = errNoFreeConn{}
			}
			return false, err
		}
		reused := !cc.LastUseTime().IsZero()
		if pc, ok := cc.Conn().(*probedConn); ok && reused && pc.probe.heard() {
			hc.CloseConn(cc)
			continue
		}
		x.cc, x.conn = cc, cc.Conn()
		return reused, nil
	}
}

// exchange writes the request and its body, and reads the response header,
// within the timeout.
func (x *fastExchange) exchange(trusted bool) error {
	p, conn := x.p, x.conn
	x.deadline = time.Now().Add(p.timeout)
	conn.SetDeadline(x.deadline)
	// The upstream's fields only, not fasthttp's defaults.
	x.res.Header.SetNoDefaultContentType(true)
	x.bw = p.hc.AcquireWriter(conn)
	length := x.ctx.Request.Header.ContentLength()
	x.writeHeader(trusted, length)
	if length > 0 || length == -1 {
		if err := x.writeBody(length); err != nil {
			return err
		}
		x.deadline = time.Now().Add(p.timeout)
		conn.SetDeadline(x.deadline)
	}
	if err := x.bw.Flush(); err != nil {
		return sendError{err}
	}
	x.br = p.hc.AcquireReader(conn)
	if err := x.readHeader(); err != nil {
		return err
	}
	conn.SetDeadline(time.Time{})
	return nil
}

// excludedResponseFields are the upstream's fields not passed on as they
// are: the hop-by-hop ones, and those of the body's framing, which the
// server writes itself.
var excludedResponseFields = func() map[string]bool {
	m := map[string]bool{"Content-Length": true}
	for _, k := range hopByHop {
		m[k] = true
	}
	return m
}()

// writeHeader writes the request line and the header to the upstream
// connection's buffer: the client's target joined onto the upstream URL's,
// the upstream's Host, the client's fields as received (in their order,
// names normalized) but the excluded ones, the body's framing, and the
// forwarding fields.
func (x *fastExchange) writeHeader(trusted bool, length int) {
	h := &x.ctx.Request.Header
	bw := x.bw
	bw.Write(h.Method())
	bw.WriteByte(' ')
	x.writeTarget()
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(x.p.host)
	bw.WriteString("\r\n")
	x.listed = x.listed[:0]
	var ua []byte
	uaSeen, te := false, false
	for k, v := range h.AllInOrder() {
		switch string(x.canonical(k)) {
		case "Connection":
			x.listed = append(x.listed, v)
		case "User-Agent":
			if !uaSeen {
				ua, uaSeen = v, true
			}
		case "Te":
			te = te || hasToken(v, []byte("trailers"))
		}
	}
	if len(ua) > 0 {
		bw.WriteString("User-Agent: ")
		bw.Write(ua)
		bw.WriteString("\r\n")
	}
	switch {
	case length > 0:
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(length), 10))
		bw.WriteString("\r\n")
	case length == -1:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
		sep := "Trailer: "
		for name := range h.Trailers() {
			bw.WriteString(sep)
			bw.Write(name)
			sep = ", "
		}
		if sep != "Trailer: " {
			bw.WriteString("\r\n")
		}
	case h.IsPost() || h.IsPut() || h.IsPatch():
		// Net/http's transport says so, as many servers expect it.
		bw.WriteString("Content-Length: 0\r\n")
	}
	for k, v := range h.AllInOrder() {
		if forwardedExclude[string(x.canonical(k))] || namedIn(x.listed, k) {
			continue
		}
		bw.Write(k)
		bw.WriteString(": ")
		bw.Write(v)
		bw.WriteString("\r\n")
	}
	if te {
		// The client takes trailers, and so does the proxy.
		bw.WriteString("Te: trailers\r\n")
	}
	if ip, ok := remoteIP(x.ctx.RemoteAddr()); ok {
		bw.WriteString("X-Forwarded-For: ")
		if trusted {
			for k, v := range h.AllInOrder() {
				if string(x.canonical(k)) == "X-Forwarded-For" {
					bw.Write(v)
					bw.WriteString(", ")
				}
			}
		}
		bw.Write(ip.AppendTo(bw.AvailableBuffer()))
		bw.WriteString("\r\n")
	}
	if host := h.Host(); len(host) > 0 {
		bw.WriteString("X-Forwarded-Host: ")
		bw.Write(host)
		bw.WriteString("\r\n")
	}
	if x.ctx.IsTLS() {
		bw.WriteString("X-Forwarded-Proto: https\r\n\r\n")
	} else {
		bw.WriteString("X-Forwarded-Proto: http\r\n\r\n")
	}
}

// remoteIP is the client's address as net/http's server tells it: an
// IPv4 address mapped into IPv6 reads as IPv4.
func remoteIP(a net.Addr) (netip.Addr, bool) {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return ap.Addr().Unmap(), ap.Addr().IsValid()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(host)
	return ip.Unmap(), err == nil
}

// writeTarget writes the request target: the client's path (of an
// absolute-form target, its path) joined onto the upstream URL's on one
// slash, and the queries of both, the client's re-encoded where the
// ReverseProxy re-encodes it (see plainQuery).
func (x *fastExchange) writeTarget() {
	p, bw := x.p, x.bw
	uri := x.ctx.Request.Header.RequestURI()
	if len(uri) > 0 && uri[0] != '/' && uri[0] != '*' {
		if i := bytes.Index(uri, []byte("://")); i >= 0 {
			rest := uri[i+3:]
			uri = rest[len(rest):]
			if j := bytes.IndexAny(rest, "/?"); j >= 0 {
				uri = rest[j:]
			}
		}
	}
	path, query, forced := uri, []byte(nil), false
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		path, query = uri[:i], uri[i+1:]
		forced = len(query) == 0
	}
	if !pathEncoded(path) {
		path = []byte(escapedPath(path))
	}
	aslash := strings.HasSuffix(p.prefix, "/")
	bslash := len(path) > 0 && path[0] == '/'
	switch {
	case aslash && bslash:
		bw.WriteString(p.prefix)
		bw.Write(path[1:])
	case !aslash && !bslash:
		bw.WriteString(p.prefix)
		bw.WriteByte('/')
		bw.Write(path)
	case p.prefix == "" && len(path) == 0:
		bw.WriteByte('/')
	default:
		bw.WriteString(p.prefix)
		bw.Write(path)
	}
	q := query
	if p.reencode || !plainQuery(b2s(query)) {
		v, _ := url.ParseQuery(string(query))
		q = []byte(v.Encode())
	}
	switch {
	case p.query != "" && len(q) > 0:
		bw.WriteByte('?')
		bw.WriteString(p.query)
		bw.WriteByte('&')
		bw.Write(q)
	case p.query != "":
		bw.WriteByte('?')
		bw.WriteString(p.query)
	case len(q) > 0 || forced:
		bw.WriteByte('?')
		bw.Write(q)
	}
}

// pathEncoded reports whether a raw path holds only bytes a URL's path
// keeps as they are (url.URL.EscapedPath's test): the ReverseProxy sends
// such a path as received, and escapes any other.
func pathEncoded(p []byte) bool {
	for _, c := range p {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~!$&'()*+,;=:@/[]%", c) >= 0) {
			return false
		}
	}
	return true
}

// escapedPath is a raw path that is not pathEncoded as the ReverseProxy
// sends it: decoded, then escaped.
func escapedPath(p []byte) string {
	decoded, err := url.PathUnescape(string(p))
	if err != nil {
		return string(p)
	}
	return (&url.URL{Path: decoded}).EscapedPath()
}

// b2s is b as a string without a copy, for a look that keeps no
// reference to it.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// hasToken reports whether a comma-separated field value holds token,
// without regard to case.
func hasToken(v, token []byte) bool {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, []byte(","))
		if bytes.EqualFold(bytes.TrimSpace(t), token) {
			return true
		}
	}
	return false
}

// namedIn reports whether one of the Connection field values names field
// k, which then concerns one connection only.
func namedIn(values [][]byte, k []byte) bool {
	for _, v := range values {
		if hasToken(v, k) {
			return true
		}
	}
	return false
}

// writeBody copies the client's body to the upstream: length bytes, or
// chunked when length is -1. Each write waits for the upstream at most the
// timeout; a read from the client that fails is a clientBodyError.
func (x *fastExchange) writeBody(length int) error {
	src := x.ctx.RequestBodyStream()
	switch {
	case src == nil:
		// The server read the body whole.
		body := x.ctx.Request.Body()
		if length >= 0 && len(body) != length {
			return clientBodyError{io.ErrUnexpectedEOF}
		}
		src = bytes.NewReader(body)
	case x.reqBody != nil:
		src = x.reqBody // the stream, through the limiter's reader
	}
	buf := copyBufferPool.Get().(*[copyBufferSize]byte)
	defer copyBufferPool.Put(buf)
	left := length
	for {
		p := buf[:]
		if length >= 0 && left < len(p) {
			p = p[:left]
		}
		n, rerr := src.Read(p)
		if n > 0 {
			if err := x.writeUpstream(buf[:n], length == -1); err != nil {
				return err
			}
			left -= n
		}
		switch {
		case length >= 0 && left == 0:
			return nil
		case rerr == io.EOF && length == -1:
			return x.writeTrailers()
		case rerr == io.EOF:
			return clientBodyError{io.ErrUnexpectedEOF}
		case rerr != nil:
			return clientBodyError{rerr}
		}
	}
}

// writeTrailers ends a chunked body with the trailers the client
// announced.
func (x *fastExchange) writeTrailers() error {
	h, bw := &x.ctx.Request.Header, x.bw
	bw.WriteString("0\r\n")
	for name := range h.Trailers() {
		for _, v := range h.PeekAll(b2s(name)) {
			bw.Write(name)
			bw.WriteString(": ")
			bw.Write(v)
			bw.WriteString("\r\n")
		}
	}
	_, err := bw.WriteString("\r\n")
	return err
}

// writeUpstream writes b to the upstream, as a chunk if chunked, within
// the timeout from now.
func (x *fastExchange) writeUpstream(b []byte, chunked bool) error {
	x.deadline = time.Now().Add(x.p.timeout)
	x.conn.SetWriteDeadline(x.deadline)
	bw := x.bw
	if chunked {
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(b)), 16))
		bw.WriteString("\r\n")
	}
	bw.Write(b)
	if chunked {
		bw.WriteString("\r\n")
	}
	return bw.Flush()
}

// bigReaders hold the readers of response headers larger than an upstream
// connection's buffer, up to maxResponseHeaderBytes.
var bigReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, maxResponseHeaderBytes) }}

// readHeader reads the final response header, after at most
// max1xxResponses informational ones: 103 Early Hints reach the client
// with their Link fields, the only ones fasthttp's server sends in a 1xx;
// the others are dropped.
func (x *fastExchange) readHeader() error {
	h := &x.res.Header
	informational := 0
	for {
		err := h.Read(x.br)
		switch {
		case err == nil:
		case isSmallBuffer(err) && !x.big:
			x.grow()
			continue
		case isSmallBuffer(err):
			return errResponseHeaderTooLarge
		case err == io.EOF:
			// Nothing of a response arrived.
			return sendError{io.EOF}
		default:
			return err
		}
		switch code := h.StatusCode(); {
		case code < 100:
			return fmt.Errorf("upstream answered with status %d", code)
		case code == http.StatusSwitchingProtocols:
			return errUnaskedSwitch
		case code >= 200:
			return nil
		}
		if informational == max1xxResponses {
			return errTooMany1xx
		}
		informational++
		if h.StatusCode() == http.StatusEarlyHints {
			x.forwardHints()
		}
	}
}

// forwardHints sends the client a 103 with the Link fields of the one
// just read, and keeps them off the final response.
func (x *fastExchange) forwardHints() {
	links := x.res.Header.PeekAll("Link")
	if len(links) == 0 {
		return
	}
	out := &x.ctx.Response.Header
	for _, l := range links {
		out.AddBytesV("Link", l)
	}
	x.ctx.EarlyHints()
	out.Del("Link")
}

// isSmallBuffer reports whether err says that a header did not fit in the
// reader's buffer.
func isSmallBuffer(err error) bool {
	var e *fasthttp.ErrSmallBuffer
	return errors.As(err, &e)
}

// grow moves the reading of a response header to a reader of
// maxResponseHeaderBytes, with the bytes already buffered. The connection
// is not reused after it.
func (x *fastExchange) grow() {
	held := bytes.Clone(mustPeek(x.br))
	x.p.hc.ReleaseReader(x.br)
	big := bigReaders.Get().(*bufio.Reader)
	big.Reset(io.MultiReader(bytes.NewReader(held), x.conn))
	x.br, x.big = big, true
}

// mustPeek returns the bytes br holds.
func mustPeek(br *bufio.Reader) []byte {
	b, _ := br.Peek(br.Buffered())
	return b
}

// respond writes the status and the upstream's fields to the client's
// response, and hands it the body as a stream: x, until its Close.
func (x *fastExchange) respond() (streams bool) {
	ctx, in := x.ctx, &x.res.Header
	out := &ctx.Response.Header
	code := in.StatusCode()
	ctx.Response.SetStatusCode(code)
	x.listed = append(x.listed[:0], in.PeekAll("Connection")...)
	for k, v := range in.All() {
		if excludedResponseFields[string(k)] || namedIn(x.listed, k) {
			continue
		}
		out.AddBytesKV(k, v)
	}
	x.length = in.ContentLength()
	if ctx.IsHead() || code == http.StatusNoContent || code == http.StatusNotModified {
		if x.length >= 0 && ctx.IsHead() {
			out.SetContentLength(x.length)
		}
		x.finish(true)
		return false
	}
	for name := range in.Trailers() {
		out.AddTrailerBytes(name)
	}
	x.res.StreamBody = true
	x.res.ReadBody(x.br, 0) // a stream: reads nothing yet, cannot fail
	x.body = x.res.BodyStream()
	ctx.Response.SetBodyStream(x, max(x.length, -1))
	return true
}

// Read reads the upstream's body for the server, and passes its trailers
// on at its end. An error (the body cut short) makes the server cut the
// client's connection, so that the response does not look whole.
func (x *fastExchange) Read(b []byte) (int, error) {
	n, err := x.body.Read(b)
	x.read += n
	if err == io.EOF {
		x.eof = true
		out := &x.ctx.Response.Header
		for name := range x.res.Header.Trailers() {
			for _, v := range x.res.Header.PeekAll(string(name)) {
				out.AddBytesKV(name, v)
			}
		}
	}
	return n, err
}

// Close ends the exchange once the server wrote the body, or failed to.
func (x *fastExchange) Close() error {
	x.finish(x.eof || (x.length >= 0 && x.read == x.length))
	return nil
}

// finish releases the connection and puts x back in the pool.
func (x *fastExchange) finish(whole bool) {
	x.release(whole)
	if f := x.after; f != nil {
		x.after = nil
		f()
	}
	x.ctx, x.reqBody = nil, nil
	clear(x.listed)
	x.listed = x.listed[:0]
	x.p.exchanges.Put(x)
}

// release gives the connection back if the response was read whole, the
// upstream keeps it open and sent nothing more, and closes it otherwise.
func (x *fastExchange) release(whole bool) {
	hc := x.p.hc
	if x.body != nil {
		x.res.CloseBodyStream()
	}
	keep := whole && !x.big && x.length != -2 && !x.res.Header.ConnectionClose() && x.br != nil && x.br.Buffered() == 0
	if x.br != nil {
		if x.big {
			x.br.Reset(nil)
			bigReaders.Put(x.br)
		} else {
			hc.ReleaseReader(x.br)
		}
	}
	if x.bw != nil {
		hc.ReleaseWriter(x.bw)
	}
	if x.cc != nil {
		if keep {
			hc.ReleaseConn(connOf(x.cc, hc.ReleaseConn))
		} else {
			hc.CloseConn(connOf(x.cc, hc.CloseConn))
		}
	}
	x.res.Reset()
	x.cc, x.conn, x.br, x.bw, x.body = nil, nil, nil, nil, nil
	x.big, x.eof, x.length, x.read = false, false, 0, 0
}

// fail answers a request the proxy could not forward, as upstreamFailure
// does: 400 or 408 when the client failed to send its body; otherwise 504
// for a timeout and 502 for any other failure, counted and logged.
func (p *fastProxy) fail(ctx *fasthttp.RequestCtx, err error) {
	var cb clientBodyError
	if errors.As(err, &cb) {
		writeFastProblem(ctx, clientBodyStatus(cb.err), bodyFailedDetail)
		return
	}
	status, detail := upstreamProblem(err, p.timeout)
	c := p.gateway
	if status == http.StatusGatewayTimeout {
		c = p.gatewayTimeout
	}
	c.Inc()
	p.log.Warn("upstream failed", "status", status, "method", string(ctx.Method()), "err", err)
	writeFastProblem(ctx, status, detail)
}

// writeFastProblem is writeProblem for a fasthttp response.
func writeFastProblem(ctx *fasthttp.RequestCtx, status int, detail string) {
	ctx.Response.SetStatusCode(status)
	h := &ctx.Response.Header
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	ctx.Response.SetBodyRaw(problemBody(status, detail))
}
