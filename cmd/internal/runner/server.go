package runner

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/audit"
	"github.com/faucetgo/faucet/cmd/internal/httpserve"
	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/rls"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/cmd/internal/stores"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/internal/failpolicy"
	"github.com/valyala/fasthttp"
)

// server is one running `faucet serve`: it owns what it opened, every
// piece of which is closed by closers.
type server struct {
	cfg     *settings.Serve
	log     *slog.Logger
	logs    *logthrottle.Set // the throttled loggers, flushed last
	metrics *metrics.Metrics
	closers closers

	lim    *httplimit.Middleware // nil without an HTTP listener
	rls    *rls.Service          // Envoy's rate-limit service, if --rls
	public http.Handler          // the limiter: proxy or check API, and /healthz
	// publicFast is public on fasthttp (--http-engine fasthttp); public
	// is then nil.
	publicFast fasthttp.RequestHandler
	admin      http.Handler // /healthz and the metrics

	// rules keeps the HTTP rules up to date with the rules file or table;
	// nil with the built-in rules. rlsConfig does the same for the
	// rate-limit service's directory.
	rules, rlsConfig reloader

	jwtVerified bool // a verifier checks the tokens rules read; set by startJWT

	// overflowSeen is each rule's overflow count at the last report; used
	// by the run loop only.
	overflowSeen map[string]uint64
}

// reloader is a configuration kept up to date by package reload.
type reloader interface {
	Check(ctx context.Context, forced bool)
	Run(ctx context.Context, tick <-chan time.Time)
}

// newServer returns a server that has opened nothing yet but its loggers.
func newServer(cfg *settings.Serve, logger *slog.Logger) *server {
	s := &server{cfg: cfg, log: logger, metrics: metrics.New(),
		logs: logthrottle.NewSet(logger.Handler(), logthrottle.Interval)}
	s.closers.add(quietly(s.logs.Flush))
	return s
}

// build opens the store (unless opts.Store is set: then it is used, and
// not closed), the audit log, the limiter of the rules read at start, and
// the rate-limit service, and builds the handlers.
func (s *server) build(opts httplimit.Options, in inputs) error {
	cfg := s.cfg
	storeLog := s.logs.Logger("store")
	if opts.Store == nil {
		store, closeStore, err := stores.Open(cfg, s.log)
		if err != nil {
			return err
		}
		opts.Store = store
		s.closers.add(func(context.Context) error { closeStore(); return nil })
		if p, ok := store.(interface{ Peers() *failpolicy.Peers }); ok {
			s.metrics.WatchPeers(p.Peers())
		}
	}
	opts.OnStoreError = func(err error) {
		s.metrics.StoreErrors.Inc()
		if errors.Is(err, engine.ErrFallback) {
			storeLog.Warn("bucket store failed, decided in memory at the fallback share", "err", err)
			return
		}
		storeLog.Error("bucket store failed without a fallback decision: rules with fail_mode open admitted, the others answered 503", "err", err)
	}
	if cfg.Audit.DSN != "" {
		a, err := audit.Start(&cfg.Audit, cfg.RulesDB.DSN != "", s.metrics, s.logs.Logger("audit"))
		if err != nil {
			return err
		}
		opts.OnDeny = a.OnDeny()
		s.closers.add(func(ctx context.Context) error {
			if err := a.Close(ctx); err != nil {
				s.log.Error("audit log: shutdown", "err", err)
			}
			return nil
		})
	}
	if cfg.Listen != "" {
		lim, err := httplimit.New(in.rules, opts)
		if err != nil {
			return s.explainDelayBound(err)
		}
		s.lim = lim
		s.closers.add(loggedClose(s.log, "rate limiter", lim.Close))
		s.metrics.Watch(lim)
		switch {
		case in.table != nil:
			s.rules = in.table.Reloader(lim, s.metrics, s.log)
		case cfg.Rules != "":
			s.rules = s.rulesFileReloader(in.rulesDigest)
		}
		var upstream *url.URL
		if cfg.Upstream != "" {
			upstream, _ = url.Parse(cfg.Upstream) // validated
		}
		var closeProxy func()
		if cfg.HTTP.Engine == settings.EngineFastHTTP {
			s.publicFast, closeProxy = httpserve.PublicFast(lim, upstream, &cfg.HTTP, s.metrics, s.logs)
		} else {
			s.public, closeProxy = httpserve.Public(lim, upstream, &cfg.HTTP, s.metrics, s.logs)
		}
		s.closers.add(quietly(closeProxy))
	}
	if in.rls != nil {
		r, err := rls.New(&cfg.RLS, &cfg.HTTP, in.rls, opts.Store, cfg.JitterSeed, opts.OnStoreError, s.log)
		if err != nil {
			return err
		}
		s.rls = r
		s.closers.add(func(ctx context.Context) error { r.Stop(ctx); return nil })
		s.metrics.WatchRLS(r.Server())
		s.rlsConfig = r.Reloader(in.rlsDigest)
	}
	s.admin = httpserve.Admin(cfg.MetricsPath, s.metrics.Handler)
	return nil
}

// listen opens the public listener and, if configured, the admin one; they
// are shut down, in that order, with the server.
func (s *server) listen() ([]*httpserve.Listener, error) {
	var out []*httpserve.Listener
	s.closers.add(func(ctx context.Context) error {
		var err error
		for _, l := range out {
			if e := l.Shutdown(ctx); e != nil {
				s.log.Error("shutdown", "listener", l.Name, "err", e)
				err = e
			}
			l.Ln.Close() // if it was never served
		}
		return err
	})
	for _, l := range []struct {
		name, addr string
		handler    http.Handler
	}{{"public", s.cfg.Listen, s.public}, {"admin", s.cfg.AdminListen, s.admin}} {
		if l.addr == "" {
			continue
		}
		maxConns := s.cfg.HTTP.MaxConns
		if l.name == "admin" {
			maxConns = settings.AdminMaxConns
		}
		var ln *httpserve.Listener
		var err error
		errorLog := s.logs.ErrorLog(l.name + " http")
		if l.name == "public" && s.publicFast != nil {
			ln, err = httpserve.ListenFast(l.name, l.addr, s.publicFast, &s.cfg.HTTP, maxConns, errorLog)
		} else {
			ln, err = httpserve.Listen(l.name, l.addr, l.handler, &s.cfg.HTTP, maxConns, errorLog)
		}
		if err != nil {
			return nil, err
		}
		if ln.Conns != nil {
			s.metrics.WatchConns(l.name, ln.Conns)
		}
		out = append(out, ln)
	}
	return out, nil
}

// listeningAttrs says where each listener is, the metrics' address
// included, and what the HTTP one does: nothing of HTTP when the
// rate-limit service runs alone.
func (s *server) listeningAttrs(lns []*httpserve.Listener) []any {
	var attrs []any
	for _, l := range lns {
		base := "http://" + l.Ln.Addr().String()
		if l.Name == "admin" {
			attrs = append(attrs, "admin_url", base)
			if s.cfg.MetricsPath != "" {
				attrs = append(attrs, "metrics_url", base+s.cfg.MetricsPath)
			}
			continue
		}
		attrs = append(attrs, "url", base)
	}
	if s.rls != nil {
		attrs = append(attrs, "rls_addr", s.rls.Addr().String(), "rls_config", s.cfg.RLS.Config)
	}
	if s.cfg.Listen == "" {
		return attrs
	}
	if s.cfg.Upstream != "" {
		attrs = append(attrs, "mode", "proxy", "upstream", s.cfg.Upstream)
	} else {
		attrs = append(attrs, "mode", "check API", "path", "/v1/check")
	}
	return append(attrs, "rules", len(s.lim.Rules()), "rules_from", s.cfg.RulesName())
}

// run serves until SIGINT or SIGTERM and returns the exit code.
func (s *server) run() int {
	// Signals are caught before anything is served: a SIGTERM that comes
	// as soon as the listening line is out must shut down gracefully, not
	// kill the process with a request in flight.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	lns, err := s.listen()
	if err == nil && s.rls != nil {
		if err = s.rls.Listen(); err == nil {
			s.rls.Export(s.metrics)
		}
	}
	if err != nil {
		s.log.Error("cannot listen", "err", err)
		s.closers.close(context.Background())
		return 1
	}
	s.log.Info("listening", s.listeningAttrs(lns)...)
	served := make(chan error, len(lns)+1)
	for _, l := range lns {
		go func() { served <- l.Serve() }()
	}
	if s.rls != nil {
		s.rls.Serve(served)
	}
	s.watch()

	report := time.NewTicker(logthrottle.Interval)
	defer report.Stop()
	code := 0
loop:
	for {
		select {
		case <-report.C:
			s.reportOverflow()
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.reload()
				continue
			}
			s.log.Info("shutting down", "signal", sig.String())
			break loop
		case err := <-served:
			s.log.Error("serve failed", "err", err)
			code = 1
			break loop
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if !s.closers.close(ctx) {
		code = 1
	}
	if code == 0 {
		s.log.Info("stopped")
	}
	return code
}

// watch starts watching the rules and the rate-limit service's
// configuration for changes, until shutdown: a file or directory is
// checked every --watch (0: only on SIGHUP), the rules table watches
// itself.
func (s *server) watch() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var tickers []*time.Ticker
	for _, r := range []reloader{s.rules, s.rlsConfig} {
		if r == nil {
			continue
		}
		var tick <-chan time.Time
		if s.cfg.Watch > 0 {
			t := time.NewTicker(s.cfg.Watch)
			tickers = append(tickers, t)
			tick = t.C
		}
		wg.Go(func() { r.Run(ctx, tick) })
	}
	s.closers.add(func(context.Context) error {
		cancel()
		wg.Wait()
		for _, t := range tickers {
			t.Stop()
		}
		return nil
	})
}

// reload reloads, on SIGHUP, the rules and the rate-limit service's
// configuration, whether they changed or not.
func (s *server) reload() {
	ctx := context.Background()
	if s.rules != nil {
		s.rules.Check(ctx, true)
	} else {
		s.log.Info("SIGHUP: no rules file, nothing to reload")
	}
	if s.rlsConfig != nil {
		s.rlsConfig.Check(ctx, true)
	}
}

// reportOverflow logs, for each rule whose key table was full since the last
// report (at most one line per rule per logthrottle.Interval), how many
// requests found it so. faucet_overflow_total counts every one.
func (s *server) reportOverflow() {
	if s.lim == nil {
		return
	}
	if s.overflowSeen == nil {
		s.overflowSeen = map[string]uint64{}
	}
	for _, st := range s.lim.Stats() {
		seen, ok := s.overflowSeen[st.Name]
		s.overflowSeen[st.Name] = st.Overflow
		if !ok && st.Overflow == 0 || st.Overflow <= seen {
			continue
		}
		what := "keys without a bucket took from the rule's overflow bucket"
		if s.cfg.OnFull == "deny" {
			what = "keys without a bucket were denied"
		}
		s.log.Warn("key table full: "+what, "rule", st.Name, "max_keys", s.cfg.MaxKeys, "on_full", s.cfg.OnFull,
			"requests", st.Overflow-seen, "live", st.Live)
	}
}
