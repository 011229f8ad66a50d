package httpserve

import (
	"errors"
	"log"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/valyala/fasthttp"
)

// ListenFast opens addr for h served by fasthttp, with the limits of f as
// net/http applies them, and capped at maxConns connections (0: uncapped)
// by conncap:
//
//   - --read-header-timeout bounds a new connection's first byte and each
//     request's header (fasthttp's ReadTimeout); --read-timeout bounds the
//     whole request from its first byte, body included (bodyDeadline), but
//     the first 8 KiB of a body, which fasthttp reads before the handler
//     runs, must arrive within --read-timeout less --read-header-timeout
//     of the header's end;
//   - --write-timeout bounds each response from the end of its request's
//     header (writeDeadline, or fasthttp's WriteTimeout from the start of
//     the response for what the handler does not bound itself);
//   - --idle-timeout bounds the wait for the next request;
//   - --max-header-bytes is fasthttp's read buffer, which bounds the
//     header: a longer one gets 431.
func ListenFast(name, addr string, h fasthttp.RequestHandler, f *settings.HTTP, maxConns int, errorLog *log.Logger) (*Listener, error) {
	l, err := open(name, addr, f, maxConns)
	if err != nil {
		return nil, err
	}
	srv := &fasthttp.Server{
		Handler:                      recovering(h, errorLog),
		ReadTimeout:                  f.ReadHeaderTimeout,
		WriteTimeout:                 f.WriteTimeout,
		IdleTimeout:                  f.IdleTimeout,
		ReadBufferSize:               f.MaxHeaderBytes,
		StreamRequestBody:            true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		ReduceMemoryUsage:            true,
		// A tunnel's proxy may still read the connection after the
		// hijack handler returned (ReverseProxy stops waiting when one
		// direction ends): the handler closes it, and fasthttp must not
		// recycle its wrapper under that read.
		KeepHijackedConns:             true,
		SecureErrorLogMessage:         true,
		CloseOnShutdown:               true,
		DisableHeaderNamesNormalizing: false,
	}
	srv.ErrorHandler = fastError
	if body := f.ReadTimeout - f.ReadHeaderTimeout; body > 0 {
		// fasthttp reads up to 8 KiB of a body before the handler runs:
		// under a bound that ends no later than --read-timeout from the
		// request's first byte, and bodyDeadline sets that exact bound
		// for the rest.
		srv.HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
			if cl := h.ContentLength(); cl == 0 || cl == -2 { // -2: none
				return fasthttp.RequestConfig{}
			}
			return fasthttp.RequestConfig{ReadTimeout: body}
		}
	}
	if errorLog != nil {
		srv.Logger = errorLog
	}
	conns := l.Conns
	srv.ConnState = func(c net.Conn, s fasthttp.ConnState) {
		fc, ok := c.(*fastConn)
		if !ok {
			return
		}
		if s == fasthttp.StateActive {
			fc.activeAt = time.Now()
		}
		if conns != nil {
			conns.ConnState(fc.Conn, netHTTPState(s))
		}
	}
	l.serve = func(ln net.Listener) error { return srv.Serve(fastListener{ln}) }
	l.shutdown = srv.ShutdownWithContext
	return l, nil
}

// fastError answers a request fasthttp could not read: 431 for a header
// over --max-header-bytes, 408 for one that did not arrive within
// --read-header-timeout, 400 otherwise, each with a problem document; the
// connection is closed after it.
func fastError(ctx *fasthttp.RequestCtx, err error) {
	status, detail := http.StatusBadRequest, "The request is malformed."
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		status, detail = http.StatusRequestHeaderFieldsTooLarge, "The request header is too large."
	case errors.As(err, &ne) && ne.Timeout():
		status, detail = http.StatusRequestTimeout, "The request did not arrive in time."
	}
	ctx.Response.Reset()
	writeFastProblem(ctx, status, detail)
}

// recovering is h with a panic contained to its connection, as net/http's
// server contains it: the connection is closed without an answer, the
// panic logged (unless it is http.ErrAbortHandler, which aborts on
// purpose), and the server serves on. fasthttp's own server would die.
func recovering(h fasthttp.RequestHandler, errorLog *log.Logger) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p != http.ErrAbortHandler && errorLog != nil {
				errorLog.Printf("panic serving %v: %v\n%s", ctx.RemoteAddr(), p, debug.Stack())
			}
			ctx.Response.Reset()
			ctx.HijackSetNoResponse(true)
			ctx.Hijack(func(c net.Conn) { c.Close() })
		}()
		h(ctx)
	}
}

// netHTTPState is net/http's name of a fasthttp connection state, which
// conncap reads.
func netHTTPState(s fasthttp.ConnState) http.ConnState {
	switch s {
	case fasthttp.StateNew:
		return http.StateNew
	case fasthttp.StateActive:
		return http.StateActive
	case fasthttp.StateIdle:
		return http.StateIdle
	case fasthttp.StateHijacked:
		return http.StateHijacked
	}
	return http.StateClosed
}

// fastListener wraps each connection it accepts in a fastConn.
type fastListener struct{ net.Listener }

func (l fastListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &fastConn{Conn: c, remote: c.RemoteAddr().String()}, nil
}

// fastConn is a client connection of a fasthttp listener: it keeps the
// client's address as text, which every request's limiter reads, and when
// the current request began.
type fastConn struct {
	net.Conn
	remote string
	// activeAt is when the current request's first byte arrived. Only the
	// connection's serving goroutine reads or writes it.
	activeAt time.Time
}

// remoteOf returns the client's address of ctx's connection as text.
func remoteOf(ctx *fasthttp.RequestCtx) string {
	if fc, ok := ctx.Conn().(*fastConn); ok {
		return fc.remote
	}
	return ctx.RemoteAddr().String()
}

// bodyDeadline bounds the reading of ctx's body by --read-timeout from
// the request's first byte, as net/http does; until then only the header's
// bound applied.
func bodyDeadline(ctx *fasthttp.RequestCtx, f *settings.HTTP) {
	start := ctx.Time()
	if fc, ok := ctx.Conn().(*fastConn); ok && !fc.activeAt.IsZero() {
		start = fc.activeAt
	}
	ctx.SetReadDeadline(start.Add(f.ReadTimeout))
}

// writeDeadline bounds ctx's response by --write-timeout from the end of
// its request's header, as net/http does, however long the handler takes.
func writeDeadline(ctx *fasthttp.RequestCtx, f *settings.HTTP) {
	ctx.SetWriteDeadline(ctx.Time().Add(f.WriteTimeout))
}
