package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"github.com/faucetgo/faucet/internal/gcfloor"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/conncap"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/internal/failpolicy"
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
	onFull          string
	jitterSeed      uint64
	watch           time.Duration
	shutdownTimeout time.Duration
	metricsPath     string
	adminListen     string
	logFormat       string
	validate        bool
	http            httpFlags
	redis           redisFlags
	postgres        postgresFlags
	jwt             jwtFlags
	rls             rlsFlags
	rulesDB         rulesDBFlags
	audit           auditFlags
	paths           httplimit.PathOptions
	// rlsLoaded is the rate-limit service's configuration read at start.
	rlsLoaded *rlsConfig
}

const (
	defaultAdminListen = "127.0.0.1:8078"
	defaultMetricsPath = "/metrics"
)

// defaultRules apply when no rules file is given: 5 requests per second per
// client address, bursts of 10.
var defaultRules = []httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: 5, Burst: 10}}

const serveUsage = `usage: faucet serve [--rules FILE] [--upstream URL] [--listen ADDR] [flags]

Enforces the rules of FILE (default: one rule, 5 requests per second per
client address, bursts of 10) on HTTP requests:
  with --upstream, as a reverse proxy in front of URL;
  without it, as a check API: POST /v1/check with a JSON description of a
  request gets the decision and the headers to send.
GET /healthz answers "ok" (never limited, never proxied). Prometheus metrics
are served on a separate admin listener (--admin-listen, loopback by default)
with its own /healthz, never on the public one: there a request for
/metrics is proxied like any other with --upstream, and 404 without. SIGHUP,
or a change to FILE, reloads the rules; buckets of unchanged rules are kept.
Rules read a request's path in one canonical form, which the upstream is
sent too: unreserved escapes decoded once, slashes merged, dot segments
removed; a path that has none (%00, a bad escape, %2F, %5C, \, ;) gets 400,
and so does a request with several values for a header or query parameter
a rule reads. The proxy opens no tunnel it was not told to: CONNECT gets
405, an h2c upgrade is proxied as plain HTTP/1.1, and any other upgrade
gets 403 unless --upgrade names it; an allowed tunnel takes one request's
tokens and is bounded by --upgrade-max-duration, --upgrade-idle-timeout and
--upgrade-max-bytes.
SIGINT or SIGTERM shuts down gracefully. A bad rules file is reported in full
and exits with status 2. Logs go to stderr; an error that repeats (a store
that is down, an upstream that fails) is logged once, then at most once
every 10 s with the number of repeats left out.

No client holds a connection for long: a request's header must arrive
within --read-header-timeout, the whole request within --read-timeout, its
response within --write-timeout; a keep-alive connection closes after
--idle-timeout without a request. At --max-conns connections a new client
takes the place of one that is idle; no request in flight is dropped, and
a client that finds no place gets 503. An upstream that does not answer within
--upstream-timeout gets 504, any other upstream failure 502, each with an
application/problem+json body.

Buckets live in this process unless --redis names a Redis server (or the
seeds of a Redis Cluster): then every instance started with the same --redis,
--redis-prefix and rules shares each rule's buckets, and together they admit
what one instance would. The password, if any, is read from the environment
variable FAUCET_REDIS_PASSWORD (and an ACL user name from FAUCET_REDIS_USERNAME),
never from the command line. When Redis fails or answers later than
--redis-timeout, an in-memory bucket per key decides at 1/N of each rule's
limit, N the instances that recorded a heartbeat in Redis within the last
5 s (--redis-fallback-share fixes the share); a rule's fail_mode "open"
admits instead, "closed" answers 503.

--postgres DSN keeps the buckets in a PostgreSQL table instead, with the same
sharing and failure behaviour (--postgres-timeout); the password comes from
PGPASSWORD or a password file, and a DSN holding one is refused.
--postgres-install creates the table (UNLOGGED unless --postgres-logged) and
its functions; without it they must exist. Rows of buckets that are full
again are removed every --postgres-sweep.

Rules that read JWT claims (jwt: keys and matches) need the tokens verified:
with the keys of a JSON Web Key Set (--jwt-jwks-file or --jwt-jwks-url: RS256,
ES256, EdDSA) or an HS256 secret read from the environment variable
FAUCET_JWT_SECRET (at least 32 bytes), never from the command line. A token
that fails verification counts as none. Without verification such rules are
refused, unless they set "insecure_unverified_jwt": true (warned about).
--validate checks the rules against these settings, loading the key set.

With --rls ADDR, faucet also serves Envoy's rate-limit service there
(gRPC envoy.service.ratelimit.v3.RateLimitService, the standard gRPC health
service, and server reflection), configured by every *.yaml file of
--rls-config DIR in envoyproxy/ratelimit's format, one domain per file. Each
matched descriptor is a token bucket of requests_per_unit refilling
requests_per_unit per unit, in the same store as the rules (--redis shares
them). A change to a file in DIR (checked every --watch) or SIGHUP reloads
them; buckets of unchanged limits are kept. --validate checks DIR too.
With --listen "" it runs alone: no HTTP rule is loaded.

With --audit-db DSN, every denial (and every request a shadow rule would
have denied, flagged) becomes a row of --audit-table in PostgreSQL, which
must exist (--audit-install creates it). Rows are written in batches by one COPY each,
from a queue of --audit-queue denials: no request waits for the database.
When the queue is full, because the database is slow or away, denials are
dropped and counted (faucet_audit_dropped_total); when it is back, what the
queue held is written. Shutdown writes the queue within --shutdown-timeout.
The DSN must hold no password: it comes from PGPASSWORD or a password file.

With --rules-db DSN instead of --rules, the rules are the active rows of a
PostgreSQL table (--rules-db-table, created if missing with its trigger by
--rules-db-install): key_pattern ip:{name} keys by client address,
user:{name} by --rules-db-user-key, endpoint:/path limits that path as one
bucket, global everything as one; a row's plan is a tier matched against
--rules-db-plan-key, a NULL plan applies to every plan without a row of its
own. A change is in force as soon as the trigger's notification arrives,
or within --rules-db-poll; buckets of unchanged rows are kept. A bad row is
logged by rule_id with every problem and left out, the others apply. An
unreachable database stops serve from starting; later, the rules in force
stay until it is back. --validate reports every bad row.

Unless GOGC is set in the environment, the garbage collector lets the heap
grow to 16 MiB, or twice what is live if that is more, before it collects:
Go's default floor of 4 MiB made it run every few hundred requests.

flags:
`

func serveFlags(fs *flag.FlagSet, cfg *serveConfig) {
	fs.StringVar(&cfg.rules, "rules", "", "rules `FILE` (JSON); default: per-ip, 5 rps, burst 10")
	fs.StringVar(&cfg.upstream, "upstream", "", "proxy allowed requests to this `URL`; without it, serve the check API")
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "listen `ADDR`ess (empty, with --rls: no HTTP listener)")
	fs.StringVar(&cfg.headers, "headers", "draft", "rate-limit header fields: a comma list of draft, legacy, x, and shadow to add shadow rules to them (left out by default: they deny nothing)")
	fs.StringVar(&cfg.trustedProxies, "trusted-proxies", "", "comma list of `CIDR`s whose forwarding header is believed")
	fs.StringVar(&cfg.forwardedHeader, "forwarded-header", "X-Forwarded-For", "header trusted proxies append to: X-Forwarded-For or Forwarded")
	fs.IntVar(&cfg.ipv6Prefix, "ipv6-prefix", 64, "prefix length that keys IPv6 clients")
	fs.IntVar(&cfg.maxKeys, "max-keys", 1_000_000, "most live buckets per rule (0: unbounded); in-memory buckets only, Redis expires its own")
	fs.StringVar(&cfg.onFull, "on-full", "share", "what a new key gets while --max-keys buckets are live and none is full: share (all such keys take from one overflow bucket per rule, at the rule's rate and burst) or deny")
	fs.Uint64Var(&cfg.jitterSeed, "jitter-seed", 0, "seed of the Retry-After jitter; share it between instances")
	fs.DurationVar(&cfg.watch, "watch", 2*time.Second, "how often to check the rules file for changes (0: only on SIGHUP)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for requests in flight")
	fs.StringVar(&cfg.adminListen, "admin-listen", defaultAdminListen, "listen `ADDR`ess for /healthz and the metrics, kept off the public listener (empty: none)")
	fs.StringVar(&cfg.metricsPath, "metrics-path", defaultMetricsPath, "path of the Prometheus metrics on the admin listener (empty: none)")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log lines on stderr as text (key=value) or json")
	fs.BoolVar(&cfg.validate, "validate", false, "check the rules file, report, and exit (0 valid, 2 invalid)")
	fs.BoolVar(&cfg.paths.KeepEncodedSlashes, "path-keep-encoded-slashes", false, "accept %2F, %5C and \\ in a path as data within a segment (default: 400)")
	fs.BoolVar(&cfg.paths.AllowSemicolons, "path-allow-semicolons", false, "accept ; and %3B in a path (default: 400)")
	fs.BoolVar(&cfg.paths.FoldCase, "path-fold-case", false, "fold a path to lower case before the rules read it and the upstream gets it")
	fs.BoolVar(&cfg.paths.TrimTrailingSlash, "path-trim-trailing-slash", false, "remove a path's trailing slash before the rules read it and the upstream gets it")
	cfg.http.register(fs)
	cfg.redis.register(fs)
	cfg.postgres.register(fs)
	cfg.jwt.register(fs)
	cfg.rls.register(fs)
	cfg.rulesDB.register(fs)
	cfg.audit.register(fs)
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
	if cfg.rls.listen != "" && cfg.rls.config != "" {
		if cfg.rlsLoaded, err = loadRLSConfig(cfg.rls.config); err != nil {
			problems = append(problems, "--rls-config: "+err.Error())
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "faucet serve: %s\n", strings.Join(problems, "\n"))
		return 2
	}
	logger := newLogger(cfg.logFormat, stderr)
	if cfg.listen != "" {
		stopJWT, err := cfg.startJWT(&opts, rules, logger)
		if err != nil {
			fmt.Fprintf(stderr, "faucet serve: %v\n", err)
			return 2
		}
		defer stopJWT()
	}
	if cfg.rulesDB.dsn != "" {
		var code int
		if rules, code = cfg.loadRulesDB(opts, logger, stderr); code != 0 {
			return code
		}
	}
	if cfg.validate {
		if cfg.listen != "" {
			fmt.Fprintf(stdout, "%s: %d rules, valid\n", cfg.rulesName(), len(rules))
		}
		if cfg.rlsLoaded != nil {
			fmt.Fprintf(stdout, "%s: %d rate-limit service domains, valid\n", cfg.rls.config, len(cfg.rlsLoaded.cfg.Domains()))
		}
		return 0
	}
	s, err := newServer(&cfg, opts, rules, logger)
	if err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	gcfloor.Keep()
	return s.run()
}

// newLogger writes serve's log lines to w in format "text" or "json".
func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// options turns the flags into httplimit.Options, listing every problem.
func (cfg *serveConfig) options() (httplimit.Options, []string) {
	var problems []string
	opts := httplimit.Options{ForwardedHeader: cfg.forwardedHeader, IPv6Prefix: cfg.ipv6Prefix, JitterSeed: cfg.jitterSeed, Paths: cfg.paths}
	for h := range strings.SplitSeq(cfg.headers, ",") {
		switch strings.TrimSpace(h) {
		case "draft":
			opts.Headers |= httplimit.HeadersDraft
		case "legacy":
			opts.Headers |= httplimit.HeadersLegacy
		case "x":
			opts.Headers |= httplimit.HeadersX
		case "shadow":
			opts.Headers |= httplimit.HeadersShadow
		default:
			problems = append(problems, fmt.Sprintf("--headers: unknown set %q; use draft, legacy, x, shadow", h))
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
	if _, ok := fullPolicies[cfg.onFull]; !ok {
		problems = append(problems, fmt.Sprintf("--on-full: must be share or deny, got %q", cfg.onFull))
	} else if cfg.onFull != "share" && (cfg.redis.addrs != "" || cfg.postgres.dsn != "") {
		problems = append(problems, "--on-full: only means something without --redis and --postgres: their buckets expire, and they keep no key table to fill")
	}
	if cfg.watch < 0 {
		problems = append(problems, "--watch: must not be negative")
	}
	switch {
	case cfg.metricsPath != "" && !strings.HasPrefix(cfg.metricsPath, "/"):
		problems = append(problems, fmt.Sprintf("--metrics-path: must start with /, got %q", cfg.metricsPath))
	case cfg.metricsPath == "/healthz":
		problems = append(problems, "--metrics-path: /healthz is the health check's")
	case cfg.adminListen == "" && cfg.metricsPath != defaultMetricsPath:
		problems = append(problems, "--metrics-path: only means something with --admin-listen")
	}
	switch {
	case cfg.listen == "" && cfg.rls.listen == "":
		problems = append(problems, "--listen: may be empty only with --rls (a rate-limit service alone)")
	case cfg.listen == "":
		// The rate-limit service alone has no HTTP rules: flags that only
		// shape them would be silently ignored.
		for _, f := range []struct{ name, val string }{{"rules", cfg.rules}, {"upstream", cfg.upstream}, {"rules-db", cfg.rulesDB.dsn}} {
			if f.val != "" {
				problems = append(problems, fmt.Sprintf("--%s: needs the HTTP listener, which --listen \"\" turns off", f.name))
			}
		}
	}
	if cfg.logFormat != "text" && cfg.logFormat != "json" {
		problems = append(problems, fmt.Sprintf("--log-format: must be text or json, got %q", cfg.logFormat))
	}
	problems = append(problems, cfg.http.problems(cfg.upstream != "")...)
	problems = append(problems, cfg.redis.problems(cfg.postgres.dsn)...)
	problems = append(problems, cfg.postgres.problems(cfg.redis.addrs)...)
	problems = append(problems, cfg.jwt.problems()...)
	problems = append(problems, cfg.rls.problems()...)
	problems = append(problems, cfg.rulesDB.problems(cfg.rules)...)
	problems = append(problems, cfg.audit.problems()...)
	return opts, problems
}

func (cfg *serveConfig) rulesName() string {
	if cfg.rulesDB.dsn != "" {
		return "table " + cfg.rulesDB.tableName()
	}
	if cfg.rules == "" {
		return "built-in rules"
	}
	return cfg.rules
}

// loadRules reads the rules file, or returns the built-in rules; none
// without an HTTP listener.
func (cfg *serveConfig) loadRules() ([]httplimit.Rule, error) {
	if cfg.listen == "" {
		return nil, nil
	}
	if cfg.rules == "" {
		return defaultRules, nil
	}
	return httplimit.FileSource(cfg.rules).Rules(context.Background())
}

// server is one running `faucet serve`.
type server struct {
	cfg        *serveConfig
	lim        *httplimit.Middleware
	closeStore func() error
	log        *slog.Logger
	metrics    *metrics
	rls        *rlsService  // Envoy's rate-limit service, if --rls
	audit      *audit       // the audit log of denials, if --audit-db
	public     http.Handler // the limiter: proxy or check API, and /healthz
	admin      http.Handler // /healthz and the metrics

	throttlesMu sync.Mutex
	throttles   []*throttledHandler // flushed on shutdown; guarded by throttlesMu

	// overflowSeen is each rule's overflow count at the last report; used
	// by the run loop only.
	overflowSeen map[string]uint64

	reloadMu sync.Mutex // serialises reloads
	fileSum  [32]byte   // of the rules file last read; guarded by reloadMu
	readErr  string     // the last error reading it, reported once; guarded by reloadMu
}

// repeatInterval is the most often an error that repeats is logged.
const repeatInterval = 10 * time.Second

// newServer builds the server the flags describe. opts.Store, if set, is
// used instead of the store of the flags, and not closed (tests pass one).
func newServer(cfg *serveConfig, opts httplimit.Options, rules []httplimit.Rule, logger *slog.Logger) (*server, error) {
	s := &server{cfg: cfg, log: logger, metrics: newMetrics(), closeStore: func() error { return nil }}
	storeLog := s.throttled("store")
	if opts.Store == nil {
		store, closeStore, err := newStore(cfg, logger)
		if err != nil {
			return nil, err
		}
		opts.Store, s.closeStore = store, closeStore
		if p, ok := store.(interface{ Peers() *failpolicy.Peers }); ok {
			s.metrics.watchPeers(p.Peers())
		}
	}
	opts.OnStoreError = func(err error) {
		s.metrics.storeErrors.Inc()
		if errors.Is(err, engine.ErrFallback) {
			storeLog.Warn("bucket store failed, decided in memory at the fallback share", "err", err)
			return
		}
		storeLog.Error("bucket store failed without a fallback decision: rules with fail_mode open admitted, the others answered 503", "err", err)
	}
	var err error
	if s.audit, err = s.startAudit(&opts); err != nil {
		s.closeStore()
		return nil, err
	}
	if cfg.listen != "" {
		if s.lim, err = httplimit.New(rules, opts); err != nil {
			s.audit.close(context.Background())
			s.closeStore()
			return nil, err
		}
		s.metrics.watch(s.lim)
	}
	if cfg.rules != "" {
		if data, err := os.ReadFile(cfg.rules); err == nil {
			s.fileSum = sha256.Sum256(data)
		}
	}
	if cfg.rlsLoaded != nil {
		if s.rls, err = newRLSService(&cfg.rls, &cfg.http, cfg.rlsLoaded, opts.Store, cfg.jitterSeed, opts.OnStoreError, logger); err != nil {
			s.closeLimiter()
			s.audit.close(context.Background())
			s.closeStore()
			return nil, err
		}
		s.metrics.watchRLS(s.rls.srv)
	}
	s.admin = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			serveHealth(w)
		case cfg.metricsPath != "" && r.URL.Path == cfg.metricsPath:
			s.metrics.handler.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
	if s.lim == nil {
		return s, nil
	}
	var inner http.Handler = s.lim.CheckHandler()
	if cfg.upstream != "" {
		u, _ := url.Parse(cfg.upstream)
		inner = s.lim.Handler(s.newProxy(u))
	}
	s.public = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			serveHealth(w)
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

// closeLimiter stops the HTTP limiter, if there is one.
func (s *server) closeLimiter() {
	if s.lim != nil {
		s.lim.Close()
	}
}

// serveHealth answers a health check: the process is up and serving.
func serveHealth(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// throttled is the server's logger for one class of errors, which repeats
// at most once per repeatInterval (see throttledHandler).
func (s *server) throttled(class string) *slog.Logger {
	h := newThrottledHandler(s.log.Handler(), repeatInterval)
	s.throttlesMu.Lock()
	s.throttles = append(s.throttles, h)
	s.throttlesMu.Unlock()
	return slog.New(h).With("component", class)
}

// errorLog is a log.Logger for the standard library's servers and proxies,
// whose messages go through the throttled slog logger of class.
func (s *server) errorLog(class string) *log.Logger {
	return slog.NewLogLogger(s.throttled(class).Handler(), slog.LevelWarn)
}

// flushLogs writes the error lines held back by the throttles.
func (s *server) flushLogs() {
	s.throttlesMu.Lock()
	defer s.throttlesMu.Unlock()
	for _, h := range s.throttles {
		h.Flush()
	}
}

// listener is one of serve's HTTP listeners, serving until shut down.
type listener struct {
	name string
	srv  *http.Server
	ln   net.Listener
}

// listen opens the public listener and, if configured, the admin one.
func (s *server) listen() ([]*listener, error) {
	var out []*listener
	for _, l := range []struct {
		name, addr string
		handler    http.Handler
	}{{"public", s.cfg.listen, s.public}, {"admin", s.cfg.adminListen, s.admin}} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			for _, o := range out {
				o.ln.Close()
			}
			return nil, err
		}
		srv := s.newHTTPServer(l.name, l.handler)
		maxConns := s.cfg.http.maxConns
		if l.name == "admin" {
			maxConns = adminMaxConns
		}
		if maxConns > 0 {
			c, err := conncap.New(ln, conncap.Config{Max: maxConns, Wait: s.cfg.http.readHeaderTimeout})
			if err != nil {
				ln.Close()
				for _, o := range out {
					o.ln.Close()
				}
				return nil, err
			}
			srv.ConnState = c.ConnState
			s.metrics.watchConns(l.name, c)
			ln = c
		}
		out = append(out, &listener{name: l.name, srv: srv, ln: ln})
	}
	return out, nil
}

// listeningAttrs says where each listener is, the metrics' address
// included, and what the HTTP one does: nothing of HTTP when the
// rate-limit service runs alone.
func (s *server) listeningAttrs(lns []*listener) []any {
	var attrs []any
	for _, l := range lns {
		base := "http://" + l.ln.Addr().String()
		if l.name == "admin" {
			attrs = append(attrs, "admin_url", base)
			if s.cfg.metricsPath != "" {
				attrs = append(attrs, "metrics_url", base+s.cfg.metricsPath)
			}
			continue
		}
		attrs = append(attrs, "url", base)
	}
	if s.rls != nil {
		attrs = append(attrs, "rls_addr", s.rls.ln.Addr().String(), "rls_config", s.cfg.rls.config)
	}
	if s.cfg.listen == "" {
		return attrs
	}
	if s.cfg.upstream != "" {
		attrs = append(attrs, "mode", "proxy", "upstream", s.cfg.upstream)
	} else {
		attrs = append(attrs, "mode", "check API", "path", "/v1/check")
	}
	return append(attrs, "rules", len(s.lim.Rules()), "rules_from", s.cfg.rulesName())
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
		if err = s.rls.listen(); err != nil {
			for _, l := range lns {
				l.ln.Close()
			}
		} else {
			if s.rls.conns != nil {
				s.metrics.watchConns("rls", s.rls.conns)
			}
			s.metrics.watchRLSCalls(&s.rls.calls, &s.rls.refused)
		}
	}
	if err != nil {
		s.log.Error("cannot listen", "err", err)
		if s.rls != nil {
			s.rls.srv.Close()
		}
		s.closeLimiter()
		s.audit.close(context.Background())
		s.closeStore()
		return 1
	}
	s.log.Info("listening", s.listeningAttrs(lns)...)
	stopRulesDB := s.watchRulesDB()
	served := make(chan error, len(lns)+1)
	for _, l := range lns {
		go func() { served <- l.srv.Serve(l.ln) }()
	}
	if s.rls != nil {
		s.rls.serve(served)
	}

	var tick <-chan time.Time
	if (s.cfg.rules != "" || s.rls != nil) && s.cfg.watch > 0 {
		t := time.NewTicker(s.cfg.watch)
		defer t.Stop()
		tick = t.C
	}
	report := time.NewTicker(repeatInterval)
	defer report.Stop()
	code := 0
loop:
	for {
		select {
		case <-report.C:
			s.reportOverflow()
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.reload(true)
				if s.rls != nil {
					s.rls.reload(true)
				}
				continue
			}
			s.log.Info("shutting down", "signal", sig.String())
			break loop
		case <-tick:
			s.reload(false)
			if s.rls != nil {
				s.rls.reload(false)
			}
		case err := <-served:
			s.log.Error("serve failed", "err", err)
			code = 1
			break loop
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.shutdownTimeout)
	defer cancel()
	for _, l := range lns {
		if err := l.srv.Shutdown(ctx); err != nil {
			s.log.Error("shutdown", "listener", l.name, "err", err)
			code = 1
		}
	}
	if s.rls != nil {
		s.rls.stop(ctx)
	}
	stopRulesDB()
	s.closeLimiter()
	if err := s.audit.close(ctx); err != nil {
		s.log.Error("audit log: shutdown", "err", err)
	}
	s.closeStore()
	s.flushLogs()
	if code == 0 {
		s.log.Info("stopped")
	}
	return code
}

// reportOverflow logs, for each rule whose key table was full since the last
// report (at most one line per rule per repeatInterval), how many requests
// found it so. faucet_overflow_total counts every one.
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
		if s.cfg.onFull == "deny" {
			what = "keys without a bucket were denied"
		}
		s.log.Warn("key table full: "+what, "rule", st.Name, "max_keys", s.cfg.maxKeys, "on_full", s.cfg.onFull,
			"requests", st.Overflow-seen, "live", st.Live)
	}
}

// reload re-reads the rules file: on SIGHUP always, on a tick only if its
// content changed. A bad file is reported and the rules in force stay.
func (s *server) reload(forced bool) {
	if w := s.cfg.rulesDB.watcher; w != nil {
		if forced {
			w.Refresh() // reloadFromDB reports it
		}
		return
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.cfg.rules == "" {
		if forced {
			s.log.Info("SIGHUP: no rules file, nothing to reload")
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
	s.log.Info("reloaded rules", "rules", len(rules), "file", s.cfg.rules)
	s.cfg.jwt.warn(rules)
}

// reloadFailed reports a failed reload; a rules file's problems are listed
// one by one.
func (s *server) reloadFailed(err error) {
	s.metrics.reloaded(false)
	attrs := []any{"file", s.cfg.rules}
	if ce := (*httplimit.ConfigError)(nil); errors.As(err, &ce) {
		problems := make([]string, len(ce.Problems))
		for i, p := range ce.Problems {
			problems[i] = p.Error()
		}
		attrs = append(attrs, "problems", problems)
	} else {
		attrs = append(attrs, "err", err)
	}
	s.log.Error("reload failed, keeping the rules in force", attrs...)
}
