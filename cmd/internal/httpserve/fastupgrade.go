package httpserve

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// On fasthttp, an upgrade the gate allowed is forwarded by the same
// httputil.ReverseProxy, and tunnelled with the same bounds, as on
// net/http: fasthttp hands the connection over once the handler returns,
// and the proxy then serves the request on it through hijackWriter, a
// ResponseWriter that writes straight to the connection. A tunnel holds
// its connection's --max-conns slot, as on net/http: fasthttp reports the
// connection hijacked, which keeps it busy until the proxy closes it.

// fastUpgrade serves r, an upgrade the gate allowed, on ctx's connection
// once the handler returns; fields are the response's fields so far (the
// limiter's). r may be in memory that is reused after the handler returns:
// what the proxy needs of it is copied first. The response must be written
// by writeBy (--write-timeout from the end of the request's header), as on
// net/http, until a tunnel takes the connection over.
func fastUpgrade(ctx *fasthttp.RequestCtx, rp *httputil.ReverseProxy, r *http.Request, fields http.Header, writeBy time.Time) {
	if r.ContentLength != 0 {
		// The body would be read from the connection after the handler
		// returned, which fasthttp does not allow; an upgrade (a
		// WebSocket handshake: a GET) carries none.
		writeProblem(&fastWriter{ctx: ctx, h: fields}, http.StatusBadRequest, "An upgrade request must not carry a body.")
		return
	}
	out := r.Clone(context.Background())
	out.Body = http.NoBody
	h := fields.Clone()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		// The connection is this function's to close (the server keeps
		// hijacked connections): closing it also ends a tunnel direction
		// the proxy left reading.
		defer c.Close()
		// fasthttp runs this on a goroutine of its own, where a panic
		// would end the process: it ends the connection instead.
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler && rp.ErrorLog != nil {
				rp.ErrorLog.Printf("panic serving an upgrade from %v: %v\n%s", c.RemoteAddr(), p, debug.Stack())
			}
		}()
		// No bound on reading: the request was read whole, and a
		// tunnel has its own. The response has the write bound of any
		// other, or a client that does not read would hold the
		// connection, and the upstream's, as long as the upstream sends.
		c.SetDeadline(time.Time{})
		c.SetWriteDeadline(writeBy)
		w := &hijackWriter{c: c, bw: bufio.NewWriter(c), h: h}
		g := &tunnelGrant{client: http.NewResponseController(w)}
		out = out.WithContext(context.WithValue(out.Context(), tunnelKey{}, g))
		rp.ServeHTTP(w, out)
		if !w.hijacked {
			w.bw.Flush()
		}
	})
}

// hijackWriter is an http.ResponseWriter on a connection fasthttp handed
// over: it writes an HTTP/1.1 response to it as it comes, ended by closing
// the connection unless it switched protocols, and hands the connection to
// the proxy for a tunnel.
type hijackWriter struct {
	c        net.Conn
	bw       *bufio.Writer
	h        http.Header
	wrote    bool
	hijacked bool
	// noBody reports that the status allows no body (1xx, 204, 304).
	noBody bool
}

func (w *hijackWriter) Header() http.Header { return w.h }

func (w *hijackWriter) WriteHeader(status int) {
	if w.wrote || w.hijacked {
		return
	}
	if status < 200 {
		// An informational response goes out at once, with the fields
		// set for it; the final response's come later.
		w.writeHead(status, w.h)
		w.bw.Flush()
		return
	}
	w.wrote = true
	h := w.h.Clone()
	// The response ends when the connection closes: the body is sent as
	// it comes, however long, and nothing follows it.
	h.Del("Transfer-Encoding")
	h.Set("Connection", "close")
	w.noBody = status == http.StatusNoContent || status == http.StatusNotModified
	w.writeHead(status, h)
}

func (w *hijackWriter) writeHead(status int, h http.Header) {
	w.bw.WriteString("HTTP/1.1 ")
	w.bw.WriteString(strconv.Itoa(status))
	w.bw.WriteByte(' ')
	w.bw.WriteString(http.StatusText(status))
	w.bw.WriteString("\r\n")
	h.Write(w.bw)
	w.bw.WriteString("\r\n")
}

func (w *hijackWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.noBody {
		return 0, http.ErrBodyNotAllowed
	}
	return w.bw.Write(p)
}

// Flush sends what was written so far: a streamed response reaches the
// client as the upstream sends it.
func (w *hijackWriter) Flush() { w.bw.Flush() }

// Hijack hands the connection to the proxy, for a tunnel: the proxy
// writes the 101 itself.
func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	// As net/http's Hijack does: the tunnel's own bounds apply now.
	w.c.SetDeadline(time.Time{})
	return w.c, bufio.NewReadWriter(bufio.NewReader(w.c), w.bw), nil
}

// SetReadDeadline and SetWriteDeadline are the connection's: a tunnel at
// a bound cuts the client's side with them.
func (w *hijackWriter) SetReadDeadline(t time.Time) error  { return w.c.SetReadDeadline(t) }
func (w *hijackWriter) SetWriteDeadline(t time.Time) error { return w.c.SetWriteDeadline(t) }
