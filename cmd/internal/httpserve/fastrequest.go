package httpserve

import (
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"sync"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"
)

// On fasthttp, the limiter still decides on an *http.Request and answers
// through an http.ResponseWriter: requestView builds both from the
// fasthttp request, as net/http would have parsed it, in memory reused from
// one request to the next. The request is what the limiter reads (method,
// target, header, client address); the body, when a handler reads it, is
// the fasthttp request's stream.

// requestView is one request's net/http view, pooled.
type requestView struct {
	r    *http.Request
	w    fastWriter
	body fastBody
	// hdr is r.Header, cleared for each request; vals backs its slices of
	// one value.
	hdr  http.Header
	vals []string
	// target is the buffer forward writes the forwarded target in.
	target []byte
}

// The request's context is the background: one that is never done. A
// fasthttp handler is not told that its client left, and a context that
// could end (the server's shutdown) would cost a goroutine for each
// context derived from it, as the stores derive one per call; the stores'
// and the upstream's timeouts bound what a request waits for.
var viewPool = sync.Pool{New: func() any {
	v := &requestView{r: new(http.Request), hdr: make(http.Header, 16)}
	v.w.h = make(http.Header, 8)
	v.w.view = v
	return v
}}

// knownMethods are returned as these strings, without allocating.
var knownMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace}

func methodString(b []byte) string {
	for _, m := range knownMethods {
		if string(b) == m {
			return m
		}
	}
	return string(b)
}

// headerNames interns the canonical names of common fields: a request's
// names are then not allocated again for each request.
var headerNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization",
		"Cache-Control", "Connection", "Content-Length", "Content-Type", "Cookie", "Forwarded",
		"If-Modified-Since", "If-None-Match", "Origin", "Pragma", "Referer", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "User-Agent", "X-Api-Key", "X-Forwarded-For",
		"X-Forwarded-Host", "X-Forwarded-Proto", "X-Http-Method-Override", "X-Http-Method",
		"X-Method-Override", "X-Real-Ip", "X-Request-Id", "Expect", "Range"} {
		m[n] = n
	}
	return m
}()

func headerName(b []byte) string {
	if n, ok := headerNames[string(b)]; ok {
		return n
	}
	return textproto.CanonicalMIMEHeaderKey(string(b))
}

// synthetic are fields fasthttp keeps apart from the others and may show
// though the client did not send them (Connection: close on HTTP/1.0,
// Content-Length: 0); the first three it also keeps one value of, and
// Cookie it rewrites from the cookies it parsed. net/http shows what was
// sent, each value of a repeated field: a rule that reads one then sees
// that it has no single value, and the limiter sees every field that a
// Connection line names, which the proxy drops.
var synthetic = [...]string{"Cookie", "User-Agent", "Content-Type", "Connection", "Content-Length", "Transfer-Encoding"}

// rawFields is how many of synthetic, from the first, are taken from the
// raw header when sent more than once; Cookie (the first) always is. The
// others fasthttp refuses to take twice.
const rawFields = 4

// badRequest is why a request cannot be taken as net/http would take it.
type badRequest string

// badVersion is the badRequest of a protocol other than HTTP/1.0 and 1.1,
// answered 505.
const badVersion badRequest = "unsupported HTTP version"

// load fills e's request from ctx, whose client is at remote; it returns
// why the request is malformed, if it is.
func (e *requestView) load(ctx *fasthttp.RequestCtx, remote string) badRequest {
	rh := &ctx.Request.Header
	r := e.r
	r.Method = methodString(rh.Method())
	r.RequestURI = string(rh.RequestURI())
	u, err := parseTarget(r.Method, r.RequestURI)
	if err != nil {
		return "malformed request target"
	}
	r.URL = u
	switch p := rh.Protocol(); {
	case string(p) == "HTTP/1.1":
		r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	case string(p) == "HTTP/1.0":
		r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.0", 1, 0
	default:
		return badVersion
	}
	clear(e.hdr)
	e.vals = e.vals[:0]
	r.Header = e.hdr
	r.Host = ""
	raw := rh.RawHeaders()
	var count [len(synthetic)]int
	folded := forEachField(raw, func(name, _ []byte) {
		for i, c := range synthetic {
			if len(name) == len(c) && bytes.EqualFold(name, []byte(c)) {
				count[i]++
			}
		}
	})
	if folded {
		// fasthttp joins the lines for the limiter, but the proxy
		// forwards the raw header, which fasthttp's second reading of a
		// fold rewrites: the upstream would get another value.
		return "obsolete line folding"
	}
	var bad badRequest
	rh.VisitAll(func(k, v []byte) {
		if bad != "" {
			return
		}
		if !httpguts.ValidHeaderFieldName(string(k)) {
			bad = "invalid header name"
			return
		}
		if string(k) == "Host" {
			r.Host = string(v)
			return
		}
		name := headerName(k)
		if name == "Transfer-Encoding" {
			// net/http keeps it in TransferEncoding alone.
			return
		}
		for i, c := range synthetic {
			if name == c && (count[i] != 1 || i == 0) {
				// Not sent, sent more than once, or rewritten: see
				// below.
				return
			}
		}
		e.add(name, string(v))
	})
	if bad != "" {
		return bad
	}
	if u.Host != "" {
		// An absolute target names the host; the Host field does not
		// count (RFC 9112, 3.2.2).
		r.Host = u.Host
	}
	if !httpguts.ValidHostHeader(r.Host) {
		return "malformed Host header"
	}
	for i := range rawFields {
		if count[i] > 1 || i == 0 && count[i] == 1 {
			e.hdr[synthetic[i]] = valuesOf(raw, synthetic[i], count[i])
		}
	}
	r.RemoteAddr = remote
	r.ContentLength = int64(rh.ContentLength())
	r.TransferEncoding = nil
	switch {
	case r.ContentLength == -1:
		r.TransferEncoding = chunkedEncoding
	case r.ContentLength < 0:
		r.ContentLength = 0
	}
	r.Close = rh.ConnectionClose()
	r.Body = http.NoBody
	if r.ContentLength != 0 {
		e.body.ctx = ctx
		r.Body = &e.body
	}
	return ""
}

var chunkedEncoding = []string{"chunked"}

// add appends v to the values of canonical name k.
func (e *requestView) add(k, v string) {
	if old, ok := e.hdr[k]; ok {
		e.hdr[k] = append(old, v)
		return
	}
	n := len(e.vals)
	e.vals = append(e.vals, v)
	e.hdr[k] = e.vals[n : n+1 : n+1]
}

// valuesOf returns the n values of field name in a raw header block.
func valuesOf(raw []byte, name string, n int) []string {
	vals := make([]string, 0, n)
	forEachField(raw, func(k, v []byte) {
		if bytes.EqualFold(k, []byte(name)) {
			vals = append(vals, string(v))
		}
	})
	return vals
}

// forEachField calls f with the name and value of each field of a raw
// header block, lines of "name: value", and reports whether a line after
// the first begins with a space or tab: a field continued on it
// (obs-fold, which RFC 9112, 5.2, lets a server refuse). Such lines are
// not passed to f.
func forEachField(raw []byte, f func(name, value []byte)) (folded bool) {
	for first := true; len(raw) > 0; first = false {
		var line []byte
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			line, raw = raw, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			folded = folded || !first
			continue
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f(name, bytes.TrimSpace(value))
	}
	return folded
}

// parseTarget parses a request target as net/http's server does.
func parseTarget(method, target string) (*url.URL, error) {
	if method == http.MethodConnect && target != "" && target[0] != '/' {
		// An authority: CONNECT host:port.
		return &url.URL{Host: target}, nil
	}
	return url.ParseRequestURI(target)
}

// forward makes the fasthttp request the one to send upstream for r,
// the request the limiter passed on: its Host is r's, which an absolute
// target names, and when the limiter made r's path canonical (r is then a
// copy of e's request), its target is that path and r's query, written as
// httputil.ReverseProxy writes them. Otherwise the client's target
// stands, which fastProxy writes as the ReverseProxy does.
func (e *requestView) forward(r *http.Request) {
	rh := &e.w.ctx.Request.Header
	if string(rh.Host()) != r.Host {
		rh.SetHost(r.Host)
	}
	if r == e.r {
		return
	}
	e.target = append(e.target[:0], r.URL.EscapedPath()...)
	if len(e.target) == 0 {
		e.target = append(e.target, '/')
	}
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		e.target = append(e.target, '?')
		e.target = append(e.target, r.URL.RawQuery...)
	}
	rh.SetRequestURIBytes(e.target)
}

// release returns e to the pool, dropping what refers to the request.
func (e *requestView) release() {
	e.body.ctx = nil
	e.r.URL, e.r.Body = nil, nil
	clear(e.hdr)
	clear(e.vals)
	e.w.reset(nil)
	viewPool.Put(e)
}

// fastBody is the request body as an io.ReadCloser: the fasthttp request's
// stream. Closing it does nothing: the server drains, or drops, what is
// left once the handler returns.
type fastBody struct{ ctx *fasthttp.RequestCtx }

func (b *fastBody) Read(p []byte) (int, error) {
	s := b.ctx.RequestBodyStream()
	if s == nil {
		return 0, io.EOF
	}
	return s.Read(p)
}

func (b *fastBody) Close() error { return nil }

// fastWriter is an http.ResponseWriter that buffers a whole response in the
// fasthttp response: for what serve answers itself (health, check API,
// denials, problems), all of it short. A proxied response does not pass
// through it.
type fastWriter struct {
	ctx   *fasthttp.RequestCtx
	h     http.Header
	wrote bool
	// view is the request view the writer is part of, which the
	// limiter's next handler forwards.
	view *requestView
	// stream is the proxied exchange whose body fasthttp sends once the
	// handler returned; nil if none.
	stream *fastExchange
}

func (w *fastWriter) reset(ctx *fasthttp.RequestCtx) {
	w.ctx = ctx
	clear(w.h)
	w.wrote = false
	w.stream = nil
}

// AfterResponse has f called once a proxied body was sent, or failed:
// the request's in-flight slots are held while it streams.
func (w *fastWriter) AfterResponse(f func()) bool {
	if w.stream == nil {
		return false
	}
	w.stream.after = f
	return true
}

func (w *fastWriter) Header() http.Header { return w.h }

func (w *fastWriter) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	copyFields(&w.ctx.Response.Header, w.h)
	w.ctx.SetStatusCode(status)
}

func (w *fastWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ctx.Write(p)
}

// copyFields adds the fields of h to a fasthttp response header in the
// order of their names, as net/http writes them, but for Content-Length,
// which fasthttp computes from the body it writes.
func copyFields(dst *fasthttp.ResponseHeader, h http.Header) {
	var buf [16]string
	names := buf[:0]
	for k := range h {
		if k != "Content-Length" {
			names = append(names, k)
		}
	}
	// Insertion sort: a handful of names, and no allocation.
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && names[j] < names[j-1]; j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
	for _, k := range names {
		for _, v := range h[k] {
			dst.Add(k, v)
		}
	}
}
