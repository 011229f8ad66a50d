package httpserve

import (
	"context"
	"log"
	"net"
	"net/http"

	"github.com/faucetgo/faucet/cmd/internal/conncap"
	"github.com/faucetgo/faucet/cmd/internal/settings"
)

// Listener is one of serve's HTTP listeners, serving until shut down, on
// net/http or on fasthttp.
type Listener struct {
	Name  string
	Ln    net.Listener
	Conns *conncap.Listener // nil when uncapped

	serve    func(net.Listener) error
	shutdown func(context.Context) error
}

// Serve serves the listener until it is shut down or fails.
func (l *Listener) Serve() error { return l.serve(l.Ln) }

// Shutdown stops accepting, waits for the requests in flight to end, and
// closes the connections, or gives up when ctx ends.
func (l *Listener) Shutdown(ctx context.Context) error { return l.shutdown(ctx) }

// Listen opens addr for h, served by net/http with the limits of f and
// capped at maxConns connections (0: uncapped) by conncap.
func Listen(name, addr string, h http.Handler, f *settings.HTTP, maxConns int, errorLog *log.Logger) (*Listener, error) {
	l, err := open(name, addr, f, maxConns)
	if err != nil {
		return nil, err
	}
	srv := newServer(h, f, errorLog)
	if l.Conns != nil {
		srv.ConnState = l.Conns.ConnState
	}
	l.serve, l.shutdown = srv.Serve, srv.Shutdown
	return l, nil
}

// open listens on addr, capped at maxConns connections (0: uncapped).
func open(name, addr string, f *settings.HTTP, maxConns int) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &Listener{Name: name, Ln: ln}
	if maxConns > 0 {
		c, err := conncap.New(ln, conncap.Config{Max: maxConns, Wait: f.ReadHeaderTimeout})
		if err != nil {
			ln.Close()
			return nil, err
		}
		l.Ln, l.Conns = c, c
	}
	return l, nil
}

// newServer serves h with the flags' limits; the connection cap is
// applied by the listener (see package conncap), not here.
func newServer(h http.Handler, f *settings.HTTP, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: f.ReadHeaderTimeout,
		ReadTimeout:       f.ReadTimeout,
		WriteTimeout:      f.WriteTimeout,
		IdleTimeout:       f.IdleTimeout,
		MaxHeaderBytes:    f.MaxHeaderBytes,
		ErrorLog:          errorLog,
	}
}
