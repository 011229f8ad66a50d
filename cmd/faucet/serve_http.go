package main

import (
	"flag"
	"fmt"
	"net/http"
	"time"
)

// httpFlags bound what a client, or the upstream, can hold of serve: time,
// header bytes and connections. Without them an idle keep-alive connection
// or a slow body stays open forever, and a few thousand of them use up the
// process's file descriptors and lock every new client out.
type httpFlags struct {
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	upstreamTimeout   time.Duration
	maxHeaderBytes    int
	maxConns          int

	// upgrade lists the protocols a request may switch to through the
	// proxy (lower case); the tunnel of one is bounded by the other three.
	upgrade            string
	upgradeMaxDuration time.Duration
	upgradeIdleTimeout time.Duration
	upgradeMaxBytes    int64
}

const (
	defaultUpstreamTimeout = 30 * time.Second
	// maxConnsCeiling is the most connections serve holds by default,
	// however many descriptors it may open: enough for any one instance.
	maxConnsCeiling = 10_000
	// adminMaxConns caps the admin listener: a scraper and a health
	// checker or two need a handful.
	adminMaxConns = 64
	// fdReserve is the descriptors the default --max-conns leaves for all
	// but client connections and their upstream ones: the admin listener's
	// cap, the waiting and refused connections of each listener (see
	// conncap), store and database pools, files and the runtime's own.
	fdReserve = 240

	defaultUpgradeMaxDuration = time.Hour
	defaultUpgradeIdleTimeout = 2 * time.Minute
	defaultUpgradeMaxBytes    = 64 << 20
	maxUpgradeDuration        = 24 * time.Hour
	maxUpgradeBytes           = 1 << 40
)

func (f *httpFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.readHeaderTimeout, "read-header-timeout", 10*time.Second, "longest a client may take to send a request's header, and a new connection its first one")
	fs.DurationVar(&f.readTimeout, "read-timeout", 30*time.Second, "longest a client may take to send a whole request, body included")
	fs.DurationVar(&f.writeTimeout, "write-timeout", 60*time.Second, "longest a response may take, from the end of the request header: it bounds a proxied stream too")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 60*time.Second, "longest a keep-alive connection stays open between requests")
	fs.DurationVar(&f.upstreamTimeout, "upstream-timeout", defaultUpstreamTimeout, "longest wait for the upstream to accept a connection, finish the TLS handshake, and to send its response header; then 504")
	fs.IntVar(&f.maxHeaderBytes, "max-header-bytes", 64<<10, "largest request header, in bytes (1024 to 1048576)")
	fs.IntVar(&f.maxConns, "max-conns", defaultMaxConns(), "most client connections open at once (0: unbounded). At the cap a new connection closes the one quiet\n"+
		"longest (idle between requests, or silent since it connected), as an idle timeout would; if every one is busy,\n"+
		"it waits up to --read-header-timeout for one to close (64 at most wait; a client refused gets 503). The cap and the\n"+
		"policy apply to the --rls listener too, on its own. Default: half the open-file limit (ulimit -n) less 240 (or a\n"+
		"quarter of a smaller one) for stores and files, at most 10000, as each proxied request holds a second descriptor, to the upstream")
	fs.StringVar(&f.upgrade, "upgrade", "", "comma-separated `LIST` of protocols (such as websocket) a proxied request may switch to with Upgrade;\n"+
		"any other upgrade is refused with 403 (default: none). h2c is never forwarded: such a request is proxied as plain HTTP/1.1")
	fs.DurationVar(&f.upgradeMaxDuration, "upgrade-max-duration", defaultUpgradeMaxDuration, "longest an upgraded connection stays open (1s to 24h)")
	fs.DurationVar(&f.upgradeIdleTimeout, "upgrade-idle-timeout", defaultUpgradeIdleTimeout, "longest an upgraded connection stays open without a byte either way (1s to --upgrade-max-duration)")
	fs.Int64Var(&f.upgradeMaxBytes, "upgrade-max-bytes", defaultUpgradeMaxBytes, "most bytes an upgraded connection carries, both directions together (1024 to 1099511627776)")
}

// defaultMaxConns is --max-conns by default: see its help.
func defaultMaxConns() int {
	n, ok := openFileLimit()
	if !ok {
		return maxConnsCeiling
	}
	reserve := min(fdReserve, n/4) // a small limit keeps a quarter
	return int(max(1, min(maxConnsCeiling, (n-reserve)/2)))
}

// problems lists what is wrong with the flags; proxy tells whether
// --upstream is set.
func (f *httpFlags) problems(proxy bool) []string {
	var problems []string
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--read-header-timeout", f.readHeaderTimeout}, {"--read-timeout", f.readTimeout},
		{"--write-timeout", f.writeTimeout}, {"--idle-timeout", f.idleTimeout}, {"--upstream-timeout", f.upstreamTimeout}} {
		if d.v <= 0 {
			problems = append(problems, fmt.Sprintf("%s: must be positive, got %v", d.flag, d.v))
		}
	}
	if f.readHeaderTimeout > f.readTimeout {
		problems = append(problems, fmt.Sprintf("--read-header-timeout: must be at most --read-timeout (%v), which includes it, got %v", f.readTimeout, f.readHeaderTimeout))
	}
	switch {
	case !proxy && f.upstreamTimeout != defaultUpstreamTimeout:
		problems = append(problems, "--upstream-timeout: only means something with --upstream")
	case proxy && f.upstreamTimeout >= f.writeTimeout:
		problems = append(problems, fmt.Sprintf("--upstream-timeout: must be below --write-timeout (%v), or the 504 could not be written, got %v", f.writeTimeout, f.upstreamTimeout))
	}
	if f.maxHeaderBytes < 1<<10 || f.maxHeaderBytes > 1<<20 {
		problems = append(problems, fmt.Sprintf("--max-header-bytes: must be from 1024 to 1048576, got %d", f.maxHeaderBytes))
	}
	if n, ok := openFileLimit(); f.maxConns < 0 || (ok && uint64(f.maxConns) > n) {
		limit := "the open-file limit"
		if ok {
			limit = fmt.Sprintf("%d, the open-file limit", n)
		}
		problems = append(problems, fmt.Sprintf("--max-conns: must be 0 (unbounded) or from 1 to %s, got %d", limit, f.maxConns))
	}
	return append(problems, f.upgradeProblems(proxy)...)
}

// upgradeProblems lists what is wrong with the --upgrade flags.
func (f *httpFlags) upgradeProblems(proxy bool) []string {
	var problems []string
	if f.upgrade != "" && !proxy {
		problems = append(problems, "--upgrade: only means something with --upstream")
	}
	if _, err := parseUpgradeList(f.upgrade); err != nil {
		problems = append(problems, "--upgrade: "+err.Error())
	}
	if f.upgradeMaxDuration < time.Second || f.upgradeMaxDuration > maxUpgradeDuration {
		problems = append(problems, fmt.Sprintf("--upgrade-max-duration: must be from 1s to %v, got %v", maxUpgradeDuration, f.upgradeMaxDuration))
	}
	if f.upgradeIdleTimeout < time.Second || f.upgradeIdleTimeout > max(time.Second, f.upgradeMaxDuration) {
		problems = append(problems, fmt.Sprintf("--upgrade-idle-timeout: must be from 1s to --upgrade-max-duration (%v), got %v", f.upgradeMaxDuration, f.upgradeIdleTimeout))
	}
	if f.upgradeMaxBytes < 1<<10 || f.upgradeMaxBytes > maxUpgradeBytes {
		problems = append(problems, fmt.Sprintf("--upgrade-max-bytes: must be from 1024 to %d, got %d", int64(maxUpgradeBytes), f.upgradeMaxBytes))
	}
	if f.upgrade == "" && (f.upgradeMaxDuration != defaultUpgradeMaxDuration || f.upgradeIdleTimeout != defaultUpgradeIdleTimeout || f.upgradeMaxBytes != defaultUpgradeMaxBytes) {
		problems = append(problems, "--upgrade-max-duration, --upgrade-idle-timeout, --upgrade-max-bytes: only mean something with --upgrade")
	}
	return problems
}

// newHTTPServer serves h with the flags' limits; maxConns is applied by the
// listener (see package conncap), not here.
func (s *server) newHTTPServer(name string, h http.Handler) *http.Server {
	f := &s.cfg.http
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: f.readHeaderTimeout,
		ReadTimeout:       f.readTimeout,
		WriteTimeout:      f.writeTimeout,
		IdleTimeout:       f.idleTimeout,
		MaxHeaderBytes:    f.maxHeaderBytes,
		ErrorLog:          s.errorLog(name + " http"),
	}
}
