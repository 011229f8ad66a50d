package settings

import (
	"flag"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

// Serve is what `faucet serve` runs with: the values of its flags.
type Serve struct {
	Rules           string
	Upstream        string
	Listen          string
	Headers         string
	TrustedProxies  string
	ForwardedHeader string
	IPv6Prefix      int
	MaxKeys         int
	// MaxLimitMiB bounds the memory of one limit's keys at MaxKeys, in
	// MiB (0: none).
	MaxLimitMiB     int
	OnFull          string
	JitterSeed      uint64
	Watch           time.Duration
	ShutdownTimeout time.Duration
	MetricsPath     string
	AdminListen     string
	LogFormat       string
	Validate        bool
	HTTP            HTTP
	Redis           Redis
	Postgres        Postgres
	JWT             JWT
	RLS             RLS
	RulesDB         RulesDB
	Audit           Audit
	Paths           httplimit.PathOptions
}

const (
	// DefaultAdminListen is --admin-listen by default: faucet's own port,
	// not Prometheus server's 9090.
	DefaultAdminListen = "127.0.0.1:8078"
	// DefaultMetricsPath is where the admin listener serves the metrics
	// unless --metrics-path says otherwise.
	DefaultMetricsPath = "/metrics"
)

// DefaultRules apply when no rules file is given: 5 requests per second per
// client address, bursts of 10.
var DefaultRules = []httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: 5, Burst: 10}}

// fullPolicies are the values of --on-full.
var fullPolicies = map[string]engine.FullPolicy{"share": engine.FullShare, "deny": engine.FullDeny}

// FullPolicy is --on-full's policy; the value is checked by Options.
func (s *Serve) FullPolicy() engine.FullPolicy { return fullPolicies[s.OnFull] }

// Register defines serve's flags on fs, storing their values in s.
func (s *Serve) Register(fs *flag.FlagSet) {
	fs.StringVar(&s.Rules, "rules", "", "rules `FILE` (JSON); default: per-ip, 5 rps, burst 10")
	fs.StringVar(&s.Upstream, "upstream", "", "proxy allowed requests to this `URL`; without it, serve the check API")
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:8080", "listen `ADDR`ess (empty, with --rls: no HTTP listener)")
	fs.StringVar(&s.Headers, "headers", "draft", "rate-limit header fields: a comma list of draft, legacy, x, and shadow to add shadow rules to them (left out by default: they deny nothing)")
	fs.StringVar(&s.TrustedProxies, "trusted-proxies", "", "comma list of `CIDR`s whose forwarding header is believed")
	fs.StringVar(&s.ForwardedHeader, "forwarded-header", "X-Forwarded-For", "header trusted proxies append to: X-Forwarded-For or Forwarded")
	fs.IntVar(&s.IPv6Prefix, "ipv6-prefix", 64, "prefix length that keys IPv6 clients")
	fs.IntVar(&s.MaxKeys, "max-keys", 1_000_000, "most live buckets per rule (0: unbounded); in-memory buckets only, Redis expires its own")
	fs.IntVar(&s.MaxLimitMiB, "max-limit-memory", 1024, "most `MiB` one limit's keys may use at --max-keys; a strict window that could use more fails to load (0: no bound)")
	fs.StringVar(&s.OnFull, "on-full", "share", "what a new key gets while --max-keys buckets are live and none is full: share (all such keys take from one overflow bucket per rule, at the rule's rate and burst) or deny")
	fs.Uint64Var(&s.JitterSeed, "jitter-seed", 0, "seed of the Retry-After jitter; share it between instances")
	fs.DurationVar(&s.Watch, "watch", 2*time.Second, "how often to check the rules file for changes (0: only on SIGHUP)")
	fs.DurationVar(&s.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for requests in flight")
	fs.StringVar(&s.AdminListen, "admin-listen", DefaultAdminListen, "listen `ADDR`ess for /healthz and the metrics, kept off the public listener (empty: none)")
	fs.StringVar(&s.MetricsPath, "metrics-path", DefaultMetricsPath, "path of the Prometheus metrics on the admin listener (empty: none)")
	fs.StringVar(&s.LogFormat, "log-format", "text", "log lines on stderr as text (key=value) or json")
	fs.BoolVar(&s.Validate, "validate", false, "check the rules file, report, and exit (0 valid, 2 invalid)")
	fs.BoolVar(&s.Paths.KeepEncodedSlashes, "path-keep-encoded-slashes", false, "accept %2F, %5C and \\ in a path as data within a segment (default: 400)")
	fs.BoolVar(&s.Paths.AllowSemicolons, "path-allow-semicolons", false, "accept ; and %3B in a path (default: 400)")
	fs.BoolVar(&s.Paths.FoldCase, "path-fold-case", false, "fold a path to lower case before the rules read it and the upstream gets it")
	fs.BoolVar(&s.Paths.TrimTrailingSlash, "path-trim-trailing-slash", false, "remove a path's trailing slash before the rules read it and the upstream gets it")
	s.HTTP.register(fs)
	s.Redis.register(fs)
	s.Postgres.register(fs)
	s.JWT.register(fs)
	s.RLS.register(fs)
	s.RulesDB.register(fs)
	s.Audit.register(fs)
}

// Options turns the flags into httplimit.Options, listing every problem
// of every flag.
func (s *Serve) Options() (httplimit.Options, []string) {
	var problems []string
	opts := httplimit.Options{ForwardedHeader: s.ForwardedHeader, IPv6Prefix: s.IPv6Prefix, JitterSeed: s.JitterSeed, Paths: s.Paths}
	for h := range strings.SplitSeq(s.Headers, ",") {
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
	if s.TrustedProxies != "" {
		for c := range strings.SplitSeq(s.TrustedProxies, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				problems = append(problems, fmt.Sprintf("--trusted-proxies: %q is not a CIDR such as 10.0.0.0/8", c))
				continue
			}
			opts.TrustedProxies = append(opts.TrustedProxies, p)
		}
	}
	if s.Upstream != "" {
		u, err := url.Parse(s.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("--upstream: %q is not an http:// or https:// URL", s.Upstream))
		}
	}
	if s.MaxLimitMiB < 0 {
		problems = append(problems, "--max-limit-memory: must be 0 (no bound) or a positive number of MiB")
	}
	if s.MaxKeys < 0 {
		problems = append(problems, "--max-keys: must be 0 (unbounded) or positive")
	}
	if _, ok := fullPolicies[s.OnFull]; !ok {
		problems = append(problems, fmt.Sprintf("--on-full: must be share or deny, got %q", s.OnFull))
	} else if s.OnFull != "share" && (s.Redis.Addrs != "" || s.Postgres.DSN != "") {
		problems = append(problems, "--on-full: only means something without --redis and --postgres: their buckets expire, and they keep no key table to fill")
	}
	if s.Watch < 0 {
		problems = append(problems, "--watch: must not be negative")
	}
	switch {
	case s.MetricsPath != "" && !strings.HasPrefix(s.MetricsPath, "/"):
		problems = append(problems, fmt.Sprintf("--metrics-path: must start with /, got %q", s.MetricsPath))
	case s.MetricsPath == "/healthz":
		problems = append(problems, "--metrics-path: /healthz is the health check's")
	case s.AdminListen == "" && s.MetricsPath != DefaultMetricsPath:
		problems = append(problems, "--metrics-path: only means something with --admin-listen")
	}
	switch {
	case s.Listen == "" && s.RLS.Listen == "":
		problems = append(problems, "--listen: may be empty only with --rls (a rate-limit service alone)")
	case s.Listen == "":
		// The rate-limit service alone has no HTTP rules: flags that only
		// shape them would be silently ignored.
		for _, f := range []struct{ name, val string }{{"rules", s.Rules}, {"upstream", s.Upstream}, {"rules-db", s.RulesDB.DSN}} {
			if f.val != "" {
				problems = append(problems, fmt.Sprintf("--%s: needs the HTTP listener, which --listen \"\" turns off", f.name))
			}
		}
	}
	if s.LogFormat != "text" && s.LogFormat != "json" {
		problems = append(problems, fmt.Sprintf("--log-format: must be text or json, got %q", s.LogFormat))
	}
	problems = append(problems, s.HTTP.problems(s.Upstream != "")...)
	s.HTTP.delayOptions(&opts, s.Upstream != "")
	problems = append(problems, s.Redis.problems(s.Postgres.DSN)...)
	problems = append(problems, s.Postgres.problems(s.Redis.Addrs)...)
	problems = append(problems, s.JWT.problems()...)
	problems = append(problems, s.RLS.problems()...)
	problems = append(problems, s.RulesDB.problems(s.Rules)...)
	problems = append(problems, s.Audit.problems()...)
	return opts, problems
}

// RulesName names where the HTTP rules come from, for messages.
func (s *Serve) RulesName() string {
	if s.RulesDB.DSN != "" {
		return "table " + s.RulesDB.TableName()
	}
	if s.Rules == "" {
		return "built-in rules"
	}
	return s.Rules
}
