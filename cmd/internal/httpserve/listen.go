package httpserve

import (
	"log"
	"net"
	"net/http"

	"github.com/faucetgo/faucet/cmd/internal/conncap"
	"github.com/faucetgo/faucet/cmd/internal/settings"
)

// Listener is one of serve's HTTP listeners, serving until shut down.
type Listener struct {
	Name  string
	Srv   *http.Server
	Ln    net.Listener
	Conns *conncap.Listener // nil when uncapped
}

// Listen opens addr for h, served with the limits of f and capped at
// maxConns connections (0: uncapped) by conncap.
func Listen(name, addr string, h http.Handler, f *settings.HTTP, maxConns int, errorLog *log.Logger) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &Listener{Name: name, Srv: newServer(h, f, errorLog), Ln: ln}
	if maxConns > 0 {
		c, err := conncap.New(ln, conncap.Config{Max: maxConns, Wait: f.ReadHeaderTimeout})
		if err != nil {
			ln.Close()
			return nil, err
		}
		l.Srv.ConnState = c.ConnState
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
