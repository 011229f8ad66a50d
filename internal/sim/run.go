package sim

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/cli"
)

const usage = `usage: %s [flags]

Simulates one client sending a steady load against a token bucket, on a
virtual clock, and reports what was admitted. --set-limit changes the rate
during the simulation, as engine.SetLimitAt does: the bucket keeps its
tokens and refills at the new rate from then on. --pause has the client
send nothing for a while.

--quota runs a calendar quota and --window-limit a strict window, instead
of the token bucket, or beside it if --rate, --burst or --set-limit is
given: each shape gets the same load on a limiter of its own, and the
report and the chart show them side by side. The clock starts at --start.

--upstream-capacity sends the admitted requests to a simulated upstream
of that capacity, which may change during the run; an adaptive
controller (package adaptive) then sets the bucket's rate from the
upstream's p99 latency and timeouts, between --adaptive-floor and
--adaptive-ceiling, and the report and the chart show the rate, the
capacity and the latency of each interval.

flags:
`

// Main runs the simulator on a command line's flags and returns the exit
// code: 0 on success (and for -h and --help, whose usage goes to stdout),
// 2 for usage errors, 1 if the chart cannot be written. name is the
// command as the user typed it, such as "faucet sim": the usage and every
// error start with it.
func Main(name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var cfg simConfig
	var rate, load string
	var changes []string
	fs.StringVar(&rate, "rate", "10", "refill `RATE`: tokens per second, or per unit (10/s, 600/m, 1/250ms)")
	fs.Func("set-limit", "change the rate at AT into the simulation to RATE, keeping the bucket's tokens: `AT=RATE`, "+
		"such as 20s=30/s, with AT from 0 to --duration and RATE as for --rate; repeatable", func(s string) error {
		changes = append(changes, s)
		return nil
	})
	fs.Float64Var(&cfg.burst, "burst", 50, "bucket capacity, tokens")
	fs.StringVar(&load, "load", "60/s", "offered load: requests per unit (60/s, 500/m, 3/250ms)")
	fs.Float64Var(&cfg.cost, "cost", 1, "tokens per request")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "simulated time")
	fs.DurationVar(&cfg.interval, "interval", time.Second, "report interval")
	fs.StringVar(&cfg.svg, "svg", "", "also draw the simulation as an SVG chart to this file")
	var pauses []string
	fs.Func("pause", "send nothing from `FROM-TO` into the simulation, such as 10s-20s; repeatable", func(s string) error {
		pauses = append(pauses, s)
		return nil
	})
	var quota, period, zone, weekday string
	var anchor engine.Calendar
	var window windowConfig
	var start string
	fs.StringVar(&quota, "quota", "", "run a calendar quota of `N` tokens per --period")
	fs.StringVar(&period, "period", "day", "the quota's period: day, week, month or year")
	fs.StringVar(&zone, "time-zone", "UTC", "the `ZONE` whose calendar the quota's periods follow (IANA, such as Europe/Berlin)")
	fs.IntVar(&anchor.Hour, "anchor-hour", 0, "the hour a quota's period begins at, 0 to 23")
	fs.StringVar(&weekday, "anchor-weekday", "", "the `DAY` a weekly quota begins on, monday (the default) to sunday")
	fs.IntVar(&anchor.Day, "anchor-day", 0, "the day of the month a monthly or yearly quota begins on, 1 to 31 (default 1)")
	fs.Func("anchor-month", "the `MONTH` a yearly quota begins in, 1 to 12 (default 1)", func(s string) error {
		m, err := strconv.Atoi(s)
		anchor.Month = time.Month(m)
		return err
	})
	fs.StringVar(&window.limitText, "window-limit", "", "run a strict window: never more than `N` tokens in any --window")
	fs.DurationVar(&window.span, "window", 0, "the strict window's span, 1s to 8784h (366 days)")
	fs.IntVar(&window.slots, "slots", 0, "the parts the window is counted in, 1 to 64 (default 16)")
	fs.StringVar(&start, "start", defaultStart, "the instant the virtual clock starts at, RFC 3339")
	var ad adaptiveFlags
	fs.StringVar(&ad.capacity, "upstream-capacity", "", "send the admitted requests to an upstream that answers `CAPACITY` requests a second, "+
		"changing at AT=CAPACITY, such as 1000,20s=200,40s=1000; an adaptive controller then sets the bucket's rate from its latency and timeouts")
	fs.DurationVar(&ad.timeout, "upstream-timeout", time.Second, "how long a request waits for the upstream before it counts as a timeout, up to 1h")
	fs.Float64Var(&ad.floor, "adaptive-floor", 0, "the lowest rate the controller sets, tokens per second (default --adaptive-ceiling/20)")
	fs.Float64Var(&ad.ceiling, "adaptive-ceiling", 0, "the highest rate the controller sets, tokens per second, up to 1e9 (default the highest --upstream-capacity)")
	fs.DurationVar(&ad.target, "latency-target", 50*time.Millisecond, "the upstream's p99 latency above which the controller decreases the rate, up to 1m")
	fs.Float64Var(&ad.decrease, "decrease", 0, "the factor of a decrease, between 0 and 1 (default 0.7)")
	fs.Float64Var(&ad.increase, "increase", 0, "what a healthy step adds to the rate, tokens per second (default --adaptive-ceiling/50)")
	if code, ok := cli.ParseFlags(fs, fmt.Sprintf(usage, name), args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	for _, f := range []string{"period", "time-zone", "anchor-hour", "anchor-weekday", "anchor-day", "anchor-month"} {
		if given[f] && !given["quota"] {
			errs = append(errs, fmt.Errorf("--%s sets a calendar quota: give --quota too", f))
		}
	}
	for _, f := range []string{"window", "slots"} {
		if given[f] && !given["window-limit"] {
			errs = append(errs, fmt.Errorf("--%s sets a strict window: give --window-limit too", f))
		}
	}
	for _, f := range adaptiveFlagNames {
		if given[f] && !given["upstream-capacity"] {
			errs = append(errs, fmt.Errorf("--%s sets the adaptive controller: give --upstream-capacity too", f))
		}
	}
	if given["upstream-capacity"] {
		for _, f := range []string{"quota", "window-limit", "set-limit"} {
			if given[f] {
				errs = append(errs, fmt.Errorf("--%s: an adaptive run (--upstream-capacity) simulates the token bucket alone, its rate set by the controller", f))
			}
		}
	}
	cfg.bucket = given["rate"] || given["burst"] || len(changes) > 0
	var err error
	if cfg.start, err = time.Parse(time.RFC3339, start); err != nil {
		errs = append(errs, fmt.Errorf("--start: want an instant in RFC 3339 such as %s, got %q", defaultStart, start))
	}
	if given["quota"] {
		q, qerrs := parseQuota(quota, period, zone, weekday, anchor)
		cfg.quota, errs = q, append(errs, qerrs...)
	}
	if given["window-limit"] {
		if window.limit, err = strconv.ParseFloat(strings.TrimSpace(window.limitText), 64); err != nil {
			errs = append(errs, fmt.Errorf("--window-limit: want a number of tokens such as 100, got %q", window.limitText))
		}
		cfg.window = &window
	}
	if len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
		}
		return 2
	}
	if cfg.rate, cfg.rateText, err = parseRate(rate); err != nil {
		fmt.Fprintf(stderr, "%s: --rate: %v\n", name, err)
		return 2
	}
	if given["upstream-capacity"] {
		if cfg.adaptive, err = parseAdaptive(ad, given, cfg.duration, cfg.burst); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 2
		}
		c := &cfg.adaptive.ctl
		if !given["rate"] {
			cfg.rate, cfg.rateText = c.Ceiling, fmtRate(c.Ceiling)+"/s"
		} else if !(cfg.rate >= c.Floor && cfg.rate <= c.Ceiling) {
			fmt.Fprintf(stderr, "%s: --rate, the adaptive rate at the start, must be from --adaptive-floor (%s) to --adaptive-ceiling (%s), got %s\n",
				name, fmtFloat(c.Floor), fmtFloat(c.Ceiling), fmtFloat(cfg.rate))
			return 2
		}
		c.Initial = cfg.rate
	}
	if cfg.load, cfg.loadText, err = parseLoad(load); err != nil {
		fmt.Fprintf(stderr, "%s: --load: %v\n", name, err)
		return 2
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if errs := cfg.checkShapes(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
		}
		return 2
	}
	if cfg.changes, err = parseChanges(changes, cfg.duration, cfg.burst); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if cfg.pauses, err = parsePauses(pauses, cfg.duration); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	for _, w := range cfg.warnings() {
		fmt.Fprintf(stderr, "%s: warning: %s\n", name, w)
	}
	res, err := simulate(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	report(stdout, cfg, res)
	if cfg.svg != "" {
		if err := drawChart(cfg, res, cfg.svg); err != nil {
			fmt.Fprintf(stderr, "%s: --svg: %v\n", name, err)
			return 1
		}
		fmt.Fprintf(stdout, "chart written to %s\n", cfg.svg)
	}
	return 0
}

// defaultStart is where the virtual clock starts without --start: a fixed
// instant, so that a quota's periods, which follow the calendar, fall
// alike in every run.
const defaultStart = "2026-01-01T00:00:00Z"

// parseQuota reads the quota's flags: --quota, --period, --time-zone and
// --anchor-weekday; the other anchors are in anchor. The engine checks the
// ranges (checkShapes).
func parseQuota(quota, period, zone, weekday string, anchor engine.Calendar) (*quotaConfig, []error) {
	var errs []error
	q := &quotaConfig{cal: anchor}
	var err error
	if q.n, err = strconv.ParseFloat(strings.TrimSpace(quota), 64); err != nil {
		errs = append(errs, fmt.Errorf("--quota: want a number of tokens such as 1000, got %q", quota))
	}
	if q.cal.Period, err = engine.ParsePeriod(period); err != nil {
		errs = append(errs, fmt.Errorf("--period: want day, week, month or year, got %q", period))
	}
	if q.cal.Location, err = time.LoadLocation(zone); err != nil || zone == "" || zone == "Local" {
		errs = append(errs, fmt.Errorf("--time-zone: want a zone of the IANA database such as Europe/Berlin, or UTC, got %q", zone))
	}
	if zone != "UTC" {
		q.zone = zone
	}
	if weekday != "" {
		if q.cal.Weekday, err = parseWeekday(weekday); err != nil {
			errs = append(errs, fmt.Errorf("--anchor-weekday: %w", err))
		}
	}
	return q, errs
}
