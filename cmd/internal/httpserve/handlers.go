package httpserve

import (
	"io"
	"net/http"
	"net/url"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
)

// Public is the public listener's handler: /healthz, and the limiter,
// in front of a reverse proxy to upstream or, when upstream is nil, as
// the check API at /v1/check. The function returned closes the proxy's
// idle upstream connections, once the listener is shut down.
func Public(lim *httplimit.Middleware, upstream *url.URL, f *settings.HTTP, m *metrics.Metrics, logs *logthrottle.Set) (http.Handler, func()) {
	if upstream == nil {
		inner := lim.CheckHandler()
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/healthz":
				serveHealth(w)
			case "/v1/check":
				inner.ServeHTTP(w, r)
			default:
				http.NotFound(w, r)
			}
		}), func() {}
	}
	proxy, closeProxy := newProxy(upstream, f, lim, m, logs)
	inner := lim.Handler(proxy)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			serveHealth(w)
			return
		}
		inner.ServeHTTP(w, r)
	}), closeProxy
}

// Admin is the admin listener's handler: /healthz, and the metrics at
// metricsPath unless it is empty.
func Admin(metricsPath string, m http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			serveHealth(w)
		case metricsPath != "" && r.URL.Path == metricsPath:
			m.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// serveHealth answers a health check: the process is up and serving.
func serveHealth(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}
