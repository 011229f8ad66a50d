package sim

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/cli"
)

const usage = `usage: %s [flags]

Simulates one client sending a steady load against a token bucket, on a
virtual clock, and reports what was admitted. --set-limit changes the rate
during the simulation, as engine.SetLimitAt does: the bucket keeps its
tokens and refills at the new rate from then on.

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
	if code, ok := cli.ParseFlags(fs, fmt.Sprintf(usage, name), args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	var err error
	if cfg.rate, cfg.rateText, err = parseRate(rate); err != nil {
		fmt.Fprintf(stderr, "%s: --rate: %v\n", name, err)
		return 2
	}
	if cfg.load, cfg.loadText, err = parseLoad(load); err != nil {
		fmt.Fprintf(stderr, "%s: --load: %v\n", name, err)
		return 2
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if err := engine.CheckLimit(engine.Limit(cfg.rate), cfg.burst); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if cfg.changes, err = parseChanges(changes, cfg.duration, cfg.burst); err != nil {
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
