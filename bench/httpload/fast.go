package main

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/valyala/fasthttp"
)

// The fasthttp floors: the same two jobs as deny and a plain proxy, on
// fasthttp's server and client instead of net/http's. fasthttp reuses
// its request and response objects and serves each connection on one
// goroutine without a second one reading ahead; what serve costs above
// these is what net/http costs, not what faucet does.

// fastDeny answers every request with faucet serve's 429, pre-rendered.
func fastDeny(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	for k, v := range denyHeader {
		if k != "Content-Length" && k != "Content-Type" {
			h.Set(k, v[0])
		}
	}
	ctx.SetContentType("application/problem+json")
	ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
	ctx.SetBodyString(denyBody)
}

// fastProxy forwards every request to upstream (host:port) with the
// client's address in X-Forwarded-For, on a pool of keep-alive
// connections, and answers 502 when the upstream fails. It does no more
// than that: no hop-by-hop handling, no upgrades, no limits.
func fastProxy(upstream string) fasthttp.RequestHandler {
	c := &fasthttp.HostClient{Addr: upstream, MaxConns: 1024, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Request.Header.Set("X-Forwarded-For", ctx.RemoteIP().String())
		if err := c.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Response.Reset()
			ctx.SetStatusCode(fasthttp.StatusBadGateway)
		}
	}
}

// serveFast prints "listening on ADDR" and serves h with fasthttp until
// the process is killed.
func serveFast(addr string, h fasthttp.RequestHandler) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	srv := &fasthttp.Server{Handler: h, ReadTimeout: 10 * time.Second, NoDefaultServerHeader: true, NoDefaultDate: false}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
