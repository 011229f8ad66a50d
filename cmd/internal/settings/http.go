package settings

import (
	"flag"
	"fmt"
	"time"
)

// HTTP bounds what a client, or the upstream, can hold of serve: time,
// header bytes and connections. Without them an idle keep-alive connection
// or a slow body stays open forever, and a few thousand of them use up the
// process's file descriptors and lock every new client out.
type HTTP struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	UpstreamTimeout   time.Duration
	MaxHeaderBytes    int
	MaxConns          int
	// MaxWaiting is --max-waiting as given: 0 for its default.
	MaxWaiting int
	// Engine is the HTTP server of the public listener: EngineNetHTTP
	// or EngineFastHTTP.
	Engine string

	// Upgrade lists the protocols a request may switch to through the
	// proxy (lower case); the tunnel of one is bounded by the other three.
	Upgrade            string
	UpgradeMaxDuration time.Duration
	UpgradeIdleTimeout time.Duration
	UpgradeMaxBytes    int64
}

// The HTTP servers the public listener can run on.
const (
	EngineNetHTTP  = "nethttp"
	EngineFastHTTP = "fasthttp"
)

const (
	defaultUpstreamTimeout = 30 * time.Second
	// maxConnsCeiling is the most connections serve holds by default,
	// however many descriptors it may open: enough for any one instance.
	maxConnsCeiling = 10_000
	// AdminMaxConns caps the admin listener: a scraper and a health
	// checker or two need a handful.
	AdminMaxConns = 64
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

func (f *HTTP) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "longest a client may take to send a request's header, and a new connection its first one")
	fs.DurationVar(&f.ReadTimeout, "read-timeout", 30*time.Second, "longest a client may take to send a whole request, body included")
	fs.DurationVar(&f.WriteTimeout, "write-timeout", 60*time.Second, "longest a response may take, from the end of the request header: it bounds a proxied stream too")
	fs.DurationVar(&f.IdleTimeout, "idle-timeout", 60*time.Second, "longest a keep-alive connection stays open between requests")
	fs.DurationVar(&f.UpstreamTimeout, "upstream-timeout", defaultUpstreamTimeout, "longest wait for the upstream to accept a connection, finish the TLS handshake, and to send its response header; then 504")
	fs.IntVar(&f.MaxHeaderBytes, "max-header-bytes", 64<<10, "largest request header, in bytes (1024 to 1048576)")
	fs.IntVar(&f.MaxConns, "max-conns", defaultMaxConns(), "most client connections open at once (0: unbounded). At the cap a new connection closes the one quiet\n"+
		"longest (idle between requests, or silent since it connected), as an idle timeout would; if every one is busy,\n"+
		"it waits up to --read-header-timeout for one to close (64 at most wait; a client refused gets 503). The cap and the\n"+
		"policy apply to the --rls listener too, on its own. Default: half the open-file limit (ulimit -n) less 240 (or a\n"+
		"quarter of a smaller one) for stores and files, at most 10000, as each proxied request holds a second descriptor, to the upstream")
	f.registerDelay(fs)
	fs.StringVar(&f.Engine, "http-engine", EngineNetHTTP, "HTTP server of the public listener: nethttp (Go's net/http) or fasthttp, which spends less CPU\n"+
		"per request; the admin listener always runs on nethttp. See docs/serve.md for what differs")
	fs.StringVar(&f.Upgrade, "upgrade", "", "comma-separated `LIST` of protocols (such as websocket) a proxied request may switch to with Upgrade;\n"+
		"any other upgrade is refused with 403 (default: none). h2c is never forwarded: such a request is proxied as plain HTTP/1.1")
	fs.DurationVar(&f.UpgradeMaxDuration, "upgrade-max-duration", defaultUpgradeMaxDuration, "longest an upgraded connection stays open (1s to 24h)")
	fs.DurationVar(&f.UpgradeIdleTimeout, "upgrade-idle-timeout", defaultUpgradeIdleTimeout, "longest an upgraded connection stays open without a byte either way (1s to --upgrade-max-duration)")
	fs.Int64Var(&f.UpgradeMaxBytes, "upgrade-max-bytes", defaultUpgradeMaxBytes, "most bytes an upgraded connection carries, both directions together (1024 to 1099511627776)")
}

// defaultMaxConns is --max-conns by default: see its help.
func defaultMaxConns() int {
	n, ok := OpenFileLimit()
	if !ok {
		return maxConnsCeiling
	}
	reserve := min(fdReserve, n/4) // a small limit keeps a quarter
	return int(max(1, min(maxConnsCeiling, (n-reserve)/2)))
}

// problems lists what is wrong with the flags; proxy tells whether
// --upstream is set.
func (f *HTTP) problems(proxy bool) []string {
	var problems []string
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--read-header-timeout", f.ReadHeaderTimeout}, {"--read-timeout", f.ReadTimeout},
		{"--write-timeout", f.WriteTimeout}, {"--idle-timeout", f.IdleTimeout}, {"--upstream-timeout", f.UpstreamTimeout}} {
		if d.v <= 0 {
			problems = append(problems, fmt.Sprintf("%s: must be positive, got %v", d.flag, d.v))
		}
	}
	if f.ReadHeaderTimeout > f.ReadTimeout {
		problems = append(problems, fmt.Sprintf("--read-header-timeout: must be at most --read-timeout (%v), which includes it, got %v", f.ReadTimeout, f.ReadHeaderTimeout))
	}
	switch {
	case !proxy && f.UpstreamTimeout != defaultUpstreamTimeout:
		problems = append(problems, "--upstream-timeout: only means something with --upstream")
	case proxy && f.UpstreamTimeout >= f.WriteTimeout:
		problems = append(problems, fmt.Sprintf("--upstream-timeout: must be below --write-timeout (%v), or the 504 could not be written, got %v", f.WriteTimeout, f.UpstreamTimeout))
	}
	if f.MaxHeaderBytes < 1<<10 || f.MaxHeaderBytes > 1<<20 {
		problems = append(problems, fmt.Sprintf("--max-header-bytes: must be from 1024 to 1048576, got %d", f.MaxHeaderBytes))
	}
	if n, ok := OpenFileLimit(); f.MaxConns < 0 || (ok && uint64(f.MaxConns) > n) {
		limit := "the open-file limit"
		if ok {
			limit = fmt.Sprintf("%d, the open-file limit", n)
		}
		problems = append(problems, fmt.Sprintf("--max-conns: must be 0 (unbounded) or from 1 to %s, got %d", limit, f.MaxConns))
	}
	if f.Engine != EngineNetHTTP && f.Engine != EngineFastHTTP {
		problems = append(problems, fmt.Sprintf("--http-engine: must be nethttp or fasthttp, got %q", f.Engine))
	}
	problems = append(problems, f.delayProblems(proxy)...)
	return append(problems, f.upgradeProblems(proxy)...)
}

// upgradeProblems lists what is wrong with the --upgrade flags.
func (f *HTTP) upgradeProblems(proxy bool) []string {
	var problems []string
	if f.Upgrade != "" && !proxy {
		problems = append(problems, "--upgrade: only means something with --upstream")
	}
	if _, err := ParseUpgradeList(f.Upgrade); err != nil {
		problems = append(problems, "--upgrade: "+err.Error())
	}
	if f.UpgradeMaxDuration < time.Second || f.UpgradeMaxDuration > maxUpgradeDuration {
		problems = append(problems, fmt.Sprintf("--upgrade-max-duration: must be from 1s to %v, got %v", maxUpgradeDuration, f.UpgradeMaxDuration))
	}
	if f.UpgradeIdleTimeout < time.Second || f.UpgradeIdleTimeout > max(time.Second, f.UpgradeMaxDuration) {
		problems = append(problems, fmt.Sprintf("--upgrade-idle-timeout: must be from 1s to --upgrade-max-duration (%v), got %v", f.UpgradeMaxDuration, f.UpgradeIdleTimeout))
	}
	if f.UpgradeMaxBytes < 1<<10 || f.UpgradeMaxBytes > maxUpgradeBytes {
		problems = append(problems, fmt.Sprintf("--upgrade-max-bytes: must be from 1024 to %d, got %d", int64(maxUpgradeBytes), f.UpgradeMaxBytes))
	}
	if f.Upgrade == "" && (f.UpgradeMaxDuration != defaultUpgradeMaxDuration || f.UpgradeIdleTimeout != defaultUpgradeIdleTimeout || f.UpgradeMaxBytes != defaultUpgradeMaxBytes) {
		problems = append(problems, "--upgrade-max-duration, --upgrade-idle-timeout, --upgrade-max-bytes: only mean something with --upgrade")
	}
	return problems
}
