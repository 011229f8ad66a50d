package httpserve

import (
	"io"
	"net/http"
	"net/url"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/valyala/fasthttp"
)

// PublicFast is Public on fasthttp: /healthz, and the limiter, in front of
// the proxy to upstream or, when upstream is nil, the check API at
// /v1/check. The limiter, the check API and the gate of upgrades are
// Public's own, run on the request's net/http view (requestView); an
// admitted request is then forwarded by fastProxy, or, if it is an upgrade
// the gate allowed, by Public's own proxy on the connection fasthttp hands
// over (fastUpgrade), while the limiter holds its in-flight slots. The
// function returned closes the proxy's idle upstream connections.
func PublicFast(lim *httplimit.Middleware, upstream *url.URL, f *settings.HTTP, m *metrics.Metrics, logs *logthrottle.Set) (fasthttp.RequestHandler, func()) {
	if upstream == nil {
		check := lim.CheckHandler()
		return fastHandler(f, func(e *requestView) {
			switch e.r.URL.Path {
			case "/healthz":
				serveHealth(&e.w)
			case "/v1/check":
				check.ServeHTTP(&e.w, e.r)
			default:
				http.NotFound(&e.w, e.r)
			}
		}), func() {}
	}
	proxy, closeProxy := newFastProxy(upstream, f, m, logs)
	tunnels := newTunnels(f, m)
	upgrades, t, _, _ := reverseProxy(upstream, f, lim, m, logs, tunnels)
	// admit is where an admitted request leaves net/http's types: it is
	// forwarded from within the limiter's handler, which holds the
	// request's in-flight slots until the upstream has answered.
	admit := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := requestViewOf(w)
		ctx := e.w.ctx
		if r.Context().Value(tunnelKey{}) != nil {
			fastUpgrade(ctx, upgrades, r, e.w.h, ctx.Time().Add(f.WriteTimeout))
			return
		}
		writeDeadline(ctx, f)
		e.forward(r)
		e.w.stream = proxy.serve(ctx, e.w.h, lim.FromTrustedProxy(r), bodyOf(e, r))
		if w != &e.w {
			// A writer around the view (an adaptive rule's) learns the
			// status the upstream answered, which fasthttp already holds.
			e.w.wrote = true
			w.WriteHeader(ctx.Response.StatusCode())
		}
	})
	limited := lim.Handler(tunnels.gate(admit))
	return fastHandler(f, func(e *requestView) {
		if e.r.URL.Path == "/healthz" {
			serveHealth(&e.w)
			return
		}
		limited.ServeHTTP(&e.w, e.r)
	}), func() { closeProxy(); t.CloseIdleConnections() }
}

// requestViewOf is the request view behind w: the limiter may have wrapped the
// view's writer (http.ResponseController's Unwrap).
func requestViewOf(w http.ResponseWriter) *requestView {
	for {
		switch x := w.(type) {
		case *fastWriter:
			return x.view
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			panic("httpserve: the limiter passed on a writer that is not the request's view")
		}
	}
}

// fastHandler runs serve on each request's net/http view; a request
// net/http would have refused as malformed gets 400 without reaching it.
// A handler that reads a body reads it under --read-timeout.
func fastHandler(f *settings.HTTP, serve func(*requestView)) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		e := viewPool.Get().(*requestView)
		defer e.release()
		e.w.reset(ctx)
		if bad := e.load(ctx, remoteOf(ctx)); bad != "" {
			ctx.SetConnectionClose()
			status := http.StatusBadRequest
			if bad == badVersion {
				status = http.StatusHTTPVersionNotSupported
			}
			writeProblem(&e.w, status, "The request is malformed: "+string(bad)+".")
			return
		}
		if e.r.ContentLength != 0 {
			bodyDeadline(ctx, f)
		}
		serve(e)
	}
}

// bodyOf is the body the proxy reads of r, the request the limiter passed
// on: the stream of e's request, unless the limiter gave r a body of its
// own around it (an adaptive rule's, which notes when it was read whole);
// nil for the stream itself.
func bodyOf(e *requestView, r *http.Request) io.Reader {
	if r.Body == nil || r.Body == http.NoBody || r.Body == &e.body {
		return nil
	}
	return r.Body
}
