package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// simConfig is what one simulation needs.
type simConfig struct {
	rate     float64
	burst    float64
	load     float64 // requests per second, evenly spaced
	loadText string  // the load as given, such as 500/m
	cost     float64
	duration time.Duration
	interval time.Duration
	svg      string
}

// simInterval is one row of the report.
type simInterval struct {
	start, end     time.Duration
	sent, admitted int
	denied         int
	tokensAtEnd    float64
}

// simSample is the state right after one request, for the chart.
type simSample struct {
	at      time.Duration
	tokens  float64
	allowed bool
}

type simResult struct {
	intervals []simInterval
	samples   []simSample
}

const simUsage = `usage: faucet sim [flags]

Simulates one client sending a steady load against a token bucket, on a
virtual clock, and reports what was admitted.

flags:
`

func runSim(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("faucet sim", flag.ContinueOnError)
	var cfg simConfig
	var load string
	fs.Float64Var(&cfg.rate, "rate", 10, "refill rate, tokens per second")
	fs.Float64Var(&cfg.burst, "burst", 50, "bucket capacity, tokens")
	fs.StringVar(&load, "load", "60/s", "offered load: requests per unit (60/s, 500/m, 3/250ms)")
	fs.Float64Var(&cfg.cost, "cost", 1, "tokens per request")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "simulated time")
	fs.DurationVar(&cfg.interval, "interval", time.Second, "report interval")
	fs.StringVar(&cfg.svg, "svg", "", "also draw the simulation as an SVG chart to this file")
	if code, ok := parseFlags(fs, simUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "faucet sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var err error
	if cfg.load, cfg.loadText, err = parseLoad(load); err != nil {
		fmt.Fprintf(stderr, "faucet sim: --load: %v\n", err)
		return 2
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintf(stderr, "faucet sim: %v\n", err)
		return 2
	}
	for _, w := range cfg.warnings() {
		fmt.Fprintf(stderr, "faucet sim: warning: %s\n", w)
	}
	res, err := simulate(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "faucet sim: %v\n", err)
		return 2
	}
	report(stdout, cfg, res)
	if cfg.svg != "" {
		if err := drawChart(cfg, res, cfg.svg); err != nil {
			fmt.Fprintf(stderr, "faucet sim: --svg: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "chart written to %s\n", cfg.svg)
	}
	return 0
}

// maxRequests bounds a simulation's size (memory for the chart's samples).
const maxRequests = 10_000_000

func (c simConfig) check() error {
	switch {
	case c.duration <= 0:
		return fmt.Errorf("--duration must be positive, got %v", c.duration)
	case c.interval <= 0 || c.interval > c.duration:
		return fmt.Errorf("--interval must be positive and at most --duration (%v), got %v", c.duration, c.interval)
	case c.duration/c.interval > 100_000:
		return fmt.Errorf("--duration/--interval must be at most 100000 rows, got %d", c.duration/c.interval)
	case c.load*c.duration.Seconds() > maxRequests:
		return fmt.Errorf("--load times --duration must be at most %d requests, got %.0f", maxRequests, c.load*c.duration.Seconds())
	}
	return nil
}

// warnings lists settings that are legal but probably not what was meant.
func (c simConfig) warnings() []string {
	var out []string
	if c.cost > c.burst {
		out = append(out, fmt.Sprintf("--cost %g is above --burst %g: the bucket never holds that many tokens, so every request will be denied", c.cost, c.burst))
	}
	if c.burst < c.rate {
		fill := time.Duration(c.burst / c.rate * float64(time.Second)).Round(time.Millisecond)
		out = append(out, fmt.Sprintf("--burst %g is below --rate %g: legal but unusual; the bucket is full after %v of refill, "+
			"so a client that pauses longer loses refill and gets less than the rate (faucet serve's rules require a burst of at least the rate)",
			c.burst, c.rate, fill))
	}
	return out
}

// parseLoad reads "N/unit" (60/s, 500/m, 3/250ms, 2/h) or a bare number of
// requests per second, and returns requests per second and the load as
// the report shows it.
func parseLoad(s string) (float64, string, error) {
	s = strings.TrimSpace(s)
	num, unit, found := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || !(n > 0) || n > 1e9 {
		return 0, "", fmt.Errorf("want a positive count of requests such as 60/s, got %q", s)
	}
	if !found {
		return n, num + "/s", nil
	}
	var per time.Duration
	switch unit {
	case "s":
		per = time.Second
	case "m", "min":
		per = time.Minute
	case "h":
		per = time.Hour
	default:
		if per, err = time.ParseDuration(unit); err != nil || per <= 0 {
			return 0, "", fmt.Errorf("want a unit s, m, h or a duration such as 250ms after '/', got %q", unit)
		}
	}
	return n / per.Seconds(), s, nil
}

// simulate runs the load against one key on a virtual clock.
func simulate(cfg simConfig) (simResult, error) {
	e, err := engine.New(engine.Config{Limit: engine.Limit(cfg.rate), Burst: cfg.burst, SweepInterval: -1})
	if err != nil {
		return simResult{}, err
	}
	defer e.Close()
	var clock time.Time // virtual: only differences matter
	var res simResult
	row := simInterval{end: cfg.interval}
	flush := func() {
		row.tokensAtEnd = e.TokensAt(clock.Add(row.end), "client")
		res.intervals = append(res.intervals, row)
		row = simInterval{start: row.end, end: min(row.end+cfg.interval, cfg.duration)}
	}
	for i := 0; ; i++ {
		// Computed per request, not as i*gap, so rounding never accumulates.
		at := time.Duration(math.Round(float64(i) * 1e9 / cfg.load))
		if at >= cfg.duration {
			break
		}
		for at >= row.end {
			flush()
		}
		d := e.AllowAt(clock.Add(at), "client", cfg.cost)
		row.sent++
		if d.Allowed {
			row.admitted++
		} else {
			row.denied++
		}
		res.samples = append(res.samples, simSample{at: at, tokens: d.Remaining, allowed: d.Allowed})
	}
	for row.start < cfg.duration {
		flush()
	}
	return res, nil
}

func report(w io.Writer, cfg simConfig, res simResult) {
	fmt.Fprintf(w, "rate %g/s, burst %g, load %s (cost %g), %v in steps of %v\n\n",
		cfg.rate, cfg.burst, cfg.loadText, cfg.cost, cfg.duration, cfg.interval)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "from\tto\tsent\tadmitted\tdenied\ttokens at end\t")
	var sent, admitted, denied int
	for _, r := range res.intervals {
		fmt.Fprintf(tw, "%v\t%v\t%d\t%d\t%d\t%.3f\t\n", r.start, r.end, r.sent, r.admitted, r.denied, r.tokensAtEnd)
		sent, admitted, denied = sent+r.sent, admitted+r.admitted, denied+r.denied
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t\t\n", sent, admitted, denied)
	tw.Flush()
}
