package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// serveConfig is what `faucet serve` runs with.
type serveConfig struct {
	rules           string
	upstream        string
	listen          string
	headers         string
	trustedProxies  string
	forwardedHeader string
	ipv6Prefix      int
	maxKeys         int
	jitterSeed      uint64
	watch           time.Duration
	shutdownTimeout time.Duration
	metricsPath     string
	validate        bool
	redis           redisFlags
}

// defaultRules apply when no rules file is given: 5 requests per second per
// client address, bursts of 10.
var defaultRules = []httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: 5, Burst: 10}}

const serveUsage = `usage: faucet serve [--rules FILE] [--upstream URL] [--listen ADDR] [flags]

Enforces the rules of FILE (default: one rule, 5 requests per second per
client address, bursts of 10) on HTTP requests:
  with --upstream, as a reverse proxy in front of URL;
  without it, as a check API: POST /v1/check with a JSON description of a
  request gets the decision and the headers to send.
GET /healthz answers "ok" (never limited, never proxied); GET /metrics serves
Prometheus metrics. SIGHUP, or a change to FILE, reloads the rules; buckets of
unchanged rules are kept. SIGINT or SIGTERM shuts down gracefully. A bad rules
file is reported in full and exits with status 2.

Buckets live in this process unless --redis names a Redis server (or the
seeds of a Redis Cluster): then every instance started with the same --redis,
--redis-prefix and rules shares each rule's buckets, and together they admit
what one instance would. The password, if any, is read from the environment
variable FAUCET_REDIS_PASSWORD (and an ACL user name from FAUCET_REDIS_USERNAME),
never from the command line. When Redis fails or answers later than
--redis-timeout, each rule's fail_mode decides ("open" admits, "closed"
answers 503).

flags:
`

func serveFlags(fs *flag.FlagSet, cfg *serveConfig) {
	fs.StringVar(&cfg.rules, "rules", "", "rules `FILE` (JSON); default: per-ip, 5 rps, burst 10")
	fs.StringVar(&cfg.upstream, "upstream", "", "proxy allowed requests to this `URL`; without it, serve the check API")
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "listen `ADDR`ess")
	fs.StringVar(&cfg.headers, "headers", "draft", "rate-limit header fields: a comma list of draft, legacy, x")
	fs.StringVar(&cfg.trustedProxies, "trusted-proxies", "", "comma list of `CIDR`s whose forwarding header is believed")
	fs.StringVar(&cfg.forwardedHeader, "forwarded-header", "X-Forwarded-For", "header trusted proxies append to: X-Forwarded-For or Forwarded")
	fs.IntVar(&cfg.ipv6Prefix, "ipv6-prefix", 64, "prefix length that keys IPv6 clients")
	fs.IntVar(&cfg.maxKeys, "max-keys", 1_000_000, "most live buckets per rule (0: unbounded); in-memory buckets only, Redis expires its own")
	fs.Uint64Var(&cfg.jitterSeed, "jitter-seed", 0, "seed of the Retry-After jitter; share it between instances")
	fs.DurationVar(&cfg.watch, "watch", 2*time.Second, "how often to check the rules file for changes (0: only on SIGHUP)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for requests in flight")
	fs.StringVar(&cfg.metricsPath, "metrics-path", "/metrics", "path of the Prometheus metrics (empty: none)")
	fs.BoolVar(&cfg.validate, "validate", false, "check the rules file, report, and exit (0 valid, 2 invalid)")
	cfg.redis.register(fs)
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("faucet serve", flag.ContinueOnError)
	var cfg serveConfig
	serveFlags(fs, &cfg)
	if code, ok := parseFlags(fs, serveUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "faucet serve: unexpected arguments %q\n", fs.Args())
		return 2
	}
	opts, problems := cfg.options()
	rules, err := cfg.loadRules()
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "faucet serve: %s\n", strings.Join(problems, "\n"))
		return 2
	}
	if cfg.validate {
		fmt.Fprintf(stdout, "%s: %d rules, valid\n", cfg.rulesName(), len(rules))
		return 0
	}
	logger := log.New(stderr, "faucet serve: ", log.LstdFlags)
	s, err := newServer(&cfg, opts, rules, logger)
	if err != nil {
		fmt.Fprintf(stderr, "faucet serve: %v\n", err)
		return 2
	}
	return s.run()
}

// options turns the flags into httplimit.Options, listing every problem.
func (cfg *serveConfig) options() (httplimit.Options, []string) {
	var problems []string
	opts := httplimit.Options{ForwardedHeader: cfg.forwardedHeader, IPv6Prefix: cfg.ipv6Prefix, JitterSeed: cfg.jitterSeed}
	for h := range strings.SplitSeq(cfg.headers, ",") {
		switch strings.TrimSpace(h) {
		case "draft":
			opts.Headers |= httplimit.HeadersDraft
		case "legacy":
			opts.Headers |= httplimit.HeadersLegacy
		case "x":
			opts.Headers |= httplimit.HeadersX
		default:
			problems = append(problems, fmt.Sprintf("--headers: unknown set %q; use draft, legacy, x", h))
		}
	}
	if cfg.trustedProxies != "" {
		for c := range strings.SplitSeq(cfg.trustedProxies, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				problems = append(problems, fmt.Sprintf("--trusted-proxies: %q is not a CIDR such as 10.0.0.0/8", c))
				continue
			}
			opts.TrustedProxies = append(opts.TrustedProxies, p)
		}
	}
	if cfg.upstream != "" {
		u, err := url.Parse(cfg.upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("--upstream: %q is not an http:// or https:// URL", cfg.upstream))
		}
	}
	if cfg.maxKeys < 0 {
		problems = append(problems, "--max-keys: must be 0 (unbounded) or positive")
	}
	if cfg.watch < 0 {
		problems = append(problems, "--watch: must not be negative")
	}
	if cfg.metricsPath != "" && !strings.HasPrefix(cfg.metricsPath, "/") {
		problems = append(problems, "--metrics-path: must start with /")
	}
	problems = append(problems, cfg.redis.problems()...)
	return opts, problems
}

func (cfg *serveConfig) rulesName() string {
	if cfg.rules == "" {
		return "built-in rules"
	}
	return cfg.rules
}

// loadRules reads the rules file, or returns the built-in rules.
func (cfg *serveConfig) loadRules() ([]httplimit.Rule, error) {
	if cfg.rules == "" {
		return defaultRules, nil
	}
	data, err := os.ReadFile(cfg.rules)
	if err != nil {
		return nil, err
	}
	rules, err := httplimit.ParseRules(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.rules, err)
	}
	return rules, nil
}

// server is one running `faucet serve`.
type server struct {
	cfg        *serveConfig
	lim        *httplimit.Limiter
	closeStore func() error
	log        *log.Logger
	metrics    *metrics
	handler    http.Handler

	reloadMu sync.Mutex // serialises reloads
	fileSum  [32]byte   // of the rules file last read; guarded by reloadMu
	readErr  string     // the last error reading it, reported once; guarded by reloadMu
}

func newServer(cfg *serveConfig, opts httplimit.Options, rules []httplimit.Rule, logger *log.Logger) (*server, error) {
	store, closeStore, err := newStore(cfg, logger)
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, closeStore: closeStore, log: logger}
	opts.Store = store
	opts.OnStoreError = func(err error) { logger.Printf("store: %v", err) }
	if s.lim, err = httplimit.New(rules, opts); err != nil {
		closeStore()
		return nil, err
	}
	if cfg.rules != "" {
		if data, err := os.ReadFile(cfg.rules); err == nil {
			s.fileSum = sha256.Sum256(data)
		}
	}
	s.metrics = newMetrics(s.lim)
	var inner http.Handler = s.lim.CheckHandler()
	if cfg.upstream != "" {
		u, _ := url.Parse(cfg.upstream)
		inner = s.lim.Handler(newProxy(u, logger, opts.TrustedProxies))
	}
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "ok\n")
		case cfg.metricsPath != "" && r.URL.Path == cfg.metricsPath:
			s.metrics.handler.ServeHTTP(w, r)
		case cfg.upstream != "":
			inner.ServeHTTP(w, r)
		case r.URL.Path == "/v1/check":
			inner.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
	return s, nil
}

// newProxy is a reverse proxy to u that tells it the client's address in
// X-Forwarded-For: appended to the incoming header when the request comes
// from a trusted proxy, replacing it otherwise (a client's own header is
// not passed on as if it were true).
func newProxy(u *url.URL, logger *log.Logger, trusted []netip.Prefix) *httputil.ReverseProxy {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			if ap, err := netip.ParseAddrPort(pr.In.RemoteAddr); err == nil {
				for _, p := range trusted {
					if p.Contains(ap.Addr().Unmap()) {
						pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
						break
					}
				}
			}
			pr.SetXForwarded()
		},
		Transport: t,
		ErrorLog:  logger,
	}
}

// run serves until SIGINT or SIGTERM and returns the exit code.
func (s *server) run() int {
	ln, err := net.Listen("tcp", s.cfg.listen)
	if err != nil {
		s.log.Printf("%v", err)
		s.lim.Close()
		s.closeStore()
		return 1
	}
	mode := "check API: POST /v1/check"
	if s.cfg.upstream != "" {
		mode = "proxying to " + s.cfg.upstream
	}
	s.log.Printf("listening on http://%s (%s), %d rules from %s", ln.Addr(), mode, len(s.lim.Rules()), s.cfg.rulesName())
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: s.log}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var tick <-chan time.Time
	if s.cfg.rules != "" && s.cfg.watch > 0 {
		t := time.NewTicker(s.cfg.watch)
		defer t.Stop()
		tick = t.C
	}
	code := 0
loop:
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.reload(true)
				continue
			}
			s.log.Printf("%v: shutting down", sig)
			break loop
		case <-tick:
			s.reload(false)
		case err := <-served:
			s.log.Printf("%v", err)
			code = 1
			break loop
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		s.log.Printf("shutdown: %v", err)
		code = 1
	}
	s.lim.Close()
	s.closeStore()
	if code == 0 {
		s.log.Printf("stopped")
	}
	return code
}

// reload re-reads the rules file: on SIGHUP always, on a tick only if its
// content changed. A bad file is reported and the rules in force stay.
func (s *server) reload(forced bool) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.cfg.rules == "" {
		if forced {
			s.log.Printf("SIGHUP: no rules file, nothing to reload")
		}
		return
	}
	data, err := os.ReadFile(s.cfg.rules)
	if err != nil {
		// A file being replaced may be missing for a moment, and a missing
		// file stays missing: report each new error once, not every tick.
		if forced || err.Error() != s.readErr {
			s.readErr = err.Error()
			s.reloadFailed(err)
		}
		return
	}
	s.readErr = ""
	sum := sha256.Sum256(data)
	if !forced && sum == s.fileSum {
		return
	}
	s.fileSum = sum
	rules, err := httplimit.ParseRules(data)
	if err == nil {
		err = s.lim.Reload(rules)
	}
	if err != nil {
		s.reloadFailed(err)
		return
	}
	s.metrics.reloaded(true)
	s.log.Printf("reloaded %d rules from %s", len(rules), s.cfg.rules)
}

func (s *server) reloadFailed(err error) {
	s.metrics.reloaded(false)
	var ce *httplimit.ConfigError
	if errors.As(err, &ce) {
		s.log.Printf("reload of %s failed, keeping the rules in force: %v", s.cfg.rules, err)
		return
	}
	s.log.Printf("reload failed, keeping the rules in force: %v", err)
}
