package sim

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/faucetgo/faucet/adaptive"
	"github.com/faucetgo/faucet/engine"
)

// engineLimit is nil if the token bucket can run at rate with burst.
func engineLimit(rate, burst float64) error {
	return engine.CheckLimit(engine.Limit(rate), burst)
}

// adaptiveConfig is an adaptive run (--upstream-capacity): the token
// bucket's rate is set by an adaptive.Controller from the health of a
// simulated upstream (upstream) that the admitted requests go to.
type adaptiveConfig struct {
	capacity     []capacityStep
	capacityText string // as given
	timeout      time.Duration
	// ctl is the controller's configuration: Floor, Ceiling, Initial,
	// LatencyTarget, Decrease and Increase as the flags give them, the
	// rest the package's defaults.
	ctl adaptive.Config
}

// upstreamRow is what the upstream did in one interval of an adaptive
// run.
type upstreamRow struct {
	rate, capacity   float64 // in force from the interval's start
	answered, failed int     // completions in the interval: answers, timeouts
	// p99 is the 99th percentile latency of the interval's completions,
	// timeouts counted at the timeout, exact (nearest rank); 0 for none.
	p99 time.Duration
}

// adaptiveRun is an adaptive run as it goes, and what the report and the
// chart show of it.
type adaptiveRun struct {
	cfg   *adaptiveConfig
	ctl   *adaptive.Controller
	up    upstream
	start time.Time
	every time.Duration // the controller's Interval
	next  time.Duration // the next step
	// latencies are the completions' of the interval being built.
	latencies        []time.Duration
	answered, failed int
	rowRate          float64 // the rate from the interval's start
	// rates are the rate over the run: its start, then each change.
	rates []point
	stats adaptive.Stats
}

func newAdaptiveRun(cfg simConfig) (*adaptiveRun, error) {
	ctl, err := adaptive.New(cfg.adaptive.ctl)
	if err != nil {
		return nil, err
	}
	a := &adaptiveRun{
		cfg: cfg.adaptive, ctl: ctl, start: cfg.start,
		up:    upstream{capacity: cfg.adaptive.capacity, timeout: cfg.adaptive.timeout},
		every: time.Second, next: time.Second, rowRate: ctl.Rate(),
	}
	a.rates = []point{{0, ctl.Rate()}}
	return a, nil
}

// until runs the controller's steps up to at, each after the completions
// before it, and delivers the completions up to at; setLimit applies each
// new rate to the token bucket.
func (a *adaptiveRun) until(at time.Duration, setLimit func(time.Time, float64) error) error {
	for ; a.next <= at; a.next += a.every {
		a.up.deliver(a.next, a.observe)
		if r, changed := a.ctl.Step(a.start.Add(a.next)); changed {
			if err := setLimit(a.start.Add(a.next), r); err != nil {
				return err
			}
			a.rates = append(a.rates, point{a.next.Seconds(), r})
		}
	}
	a.up.deliver(at, a.observe)
	return nil
}

func (a *adaptiveRun) observe(c completion) {
	a.ctl.Observe(a.start.Add(c.at), c.latency, c.failed)
	a.latencies = append(a.latencies, c.latency)
	if c.failed {
		a.failed++
	} else {
		a.answered++
	}
}

// row ends the interval from start: what the upstream did in it. The next
// interval's rate is the one in force now.
func (a *adaptiveRun) row(start time.Duration) upstreamRow {
	r := upstreamRow{rate: a.rowRate, capacity: a.up.capacityAt(start), answered: a.answered, failed: a.failed}
	if n := len(a.latencies); n > 0 {
		slices.Sort(a.latencies)
		r.p99 = a.latencies[(99*n+99)/100-1]
	}
	a.latencies, a.answered, a.failed = a.latencies[:0], 0, 0
	a.rowRate = a.ctl.Rate()
	return r
}

// settleSpan is how long after the p99 is back under the target the
// admitted rate is averaged, to compare with the new capacity.
const settleSpan = 10 * time.Second

// settling is how an adaptive run met one change of capacity.
type settling struct {
	change capacityStep
	drop   bool // the capacity fell
	// under is the end of the first interval, from the change on, whose
	// p99 is at most the target; -1 if none.
	under time.Duration
	// admitted is the mean admitted per second over the settleSpan after
	// under, or as much of it as the run has (span).
	admitted float64
	span     time.Duration
	// reach is the start of the first interval, from the change on, in
	// which the rate is at least 90 % of the new capacity; -1 if none.
	reach time.Duration
}

// settlings are how the run met each change of capacity, up to the next.
func settlings(cfg simConfig, rows []simInterval) []settling {
	var out []settling
	caps := cfg.adaptive.capacity
	for i := 1; i < len(caps); i++ {
		s := settling{change: caps[i], drop: caps[i].rate < caps[i-1].rate, under: -1, reach: -1}
		end := cfg.duration
		if i+1 < len(caps) {
			end = caps[i+1].at
		}
		for _, r := range rows {
			if r.start < s.change.at || r.start >= end {
				continue
			}
			if s.under < 0 && r.up.p99 <= cfg.adaptive.ctl.LatencyTarget {
				s.under = r.end
			}
			if s.reach < 0 && r.up.rate >= 0.9*s.change.rate {
				s.reach = r.start
			}
		}
		if s.under >= 0 {
			n := 0
			for _, r := range rows {
				if r.start >= s.under && r.end <= min(s.under+settleSpan, end) {
					n += r.admitted
					s.span += r.end - r.start
				}
			}
			if s.span > 0 {
				s.admitted = float64(n) / s.span.Seconds()
			}
		}
		out = append(out, s)
	}
	return out
}

// reportAdaptive writes an adaptive run: a table of its intervals with
// what the upstream did, then how the rate met each change of capacity.
func reportAdaptive(w io.Writer, cfg simConfig, res simResult) {
	a := cfg.adaptive
	fmt.Fprintf(w, "adaptive rate %s/s to %s/s (from %s/s), p99 target %v, burst %g, load %s (cost %g), %s in steps of %s\n",
		fmtRate(a.ctl.Floor), fmtRate(a.ctl.Ceiling), fmtRate(cfg.rate), a.ctl.LatencyTarget, cfg.burst, cfg.loadText, cfg.cost,
		shortDuration(cfg.duration), shortDuration(cfg.interval))
	fmt.Fprintf(w, "upstream capacity %s, timeout %v\n", capacityText(a.capacity), a.timeout)
	for _, p := range cfg.pauses {
		fmt.Fprintf(w, "from %s to %s: no requests\n", shortDuration(p.from), shortDuration(p.to))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "from\tto\tsent\tadmitted\tdenied\trate/s\tcapacity/s\tp99\ttimeouts\t\n")
	run := res.runs[0]
	for _, r := range run.intervals {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t\n", shortDuration(r.start), shortDuration(r.end), r.sent(), r.admitted, r.denied,
			fmtRate(r.up.rate), fmtRate(r.up.capacity), fmtLatency(r.up.p99, r.up.answered+r.up.failed), r.up.failed)
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t\t\t\t%d\t\n", run.sent(), run.admitted(), run.denied(), run.sum(func(i simInterval) int { return i.up.failed }))
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s: admitted %d, denied %d, most in any %s: %d\n", run.title, run.admitted(), run.denied(), shortDuration(cfg.span()), run.most)
	st := res.adaptive.stats
	fmt.Fprintf(w, "controller: %d decreases, %d increases, %d holds while the upstream drained its queue\n", st.Decreases, st.Increases, st.Drains)
	for _, s := range settlings(cfg, run.intervals) {
		fmt.Fprintf(w, "at %s capacity → %s/s: ", shortDuration(s.change.at), fmtRate(s.change.rate))
		if s.under < 0 {
			fmt.Fprintf(w, "p99 never back under %v\n", a.ctl.LatencyTarget)
			continue
		}
		fmt.Fprintf(w, "p99 under %v from %s (%s after)", a.ctl.LatencyTarget, shortDuration(s.under), shortDuration(s.under-s.change.at))
		switch {
		case s.drop && s.span > 0:
			fmt.Fprintf(w, ", then admitted %.1f/s over %s (%.0f %% of capacity)", s.admitted, shortDuration(s.span), 100*s.admitted/s.change.rate)
		case s.drop:
		case s.reach < 0:
			fmt.Fprintf(w, "; rate never at 90 %% of capacity")
		default:
			fmt.Fprintf(w, "; rate at 90 %% of capacity from %s (%s after)", shortDuration(s.reach), shortDuration(s.reach-s.change.at))
		}
		fmt.Fprintln(w)
	}
}

// capacityText is the capacity schedule as the report gives it: "1000/s,
// from 20s 200/s, from 40s 1000/s".
func capacityText(steps []capacityStep) string {
	s := fmtRate(steps[0].rate) + "/s"
	for _, st := range steps[1:] {
		s += ", from " + shortDuration(st.at) + " " + fmtRate(st.rate) + "/s"
	}
	return s
}

// fmtRate is a rate in requests or tokens a second, to a tenth at most.
func fmtRate(r float64) string { return formatTick(r, 1) }

// fmtLatency is a latency for the report: "-" for an interval without
// completions.
func fmtLatency(d time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	if d < time.Second {
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

// adaptiveFlags are the flags of an adaptive run as given; 0 for a flag
// not given, which takes its default.
type adaptiveFlags struct {
	capacity           string
	timeout            time.Duration
	floor, ceiling     float64
	target             time.Duration
	decrease, increase float64
}

// adaptiveFlagNames are the flags that only an adaptive run reads.
var adaptiveFlagNames = []string{"upstream-timeout", "adaptive-floor", "adaptive-ceiling", "latency-target", "decrease", "increase"}

// parseAdaptive checks the flags of an adaptive run and fills in their
// defaults: the ceiling is the highest capacity, the floor a twentieth of
// the ceiling. Each error names its flag and what it accepts.
func parseAdaptive(f adaptiveFlags, given map[string]bool, duration time.Duration, burst float64) (*adaptiveConfig, error) {
	caps, err := parseCapacity(f.capacity, duration)
	if err != nil {
		return nil, err
	}
	a := &adaptiveConfig{capacity: caps, capacityText: f.capacity, timeout: f.timeout}
	if f.timeout <= 0 || f.timeout > time.Hour {
		return nil, fmt.Errorf("--upstream-timeout must be more than 0 and at most 1h, got %v", f.timeout)
	}
	c := &a.ctl
	c.Ceiling = f.ceiling
	if !given["adaptive-ceiling"] {
		for _, s := range caps {
			c.Ceiling = max(c.Ceiling, s.rate)
		}
	} else if !(c.Ceiling > 0 && c.Ceiling <= 1e9) {
		return nil, fmt.Errorf("--adaptive-ceiling must be more than 0 and at most 1e9 tokens per second, got %v", f.ceiling)
	}
	c.Floor = f.floor
	if !given["adaptive-floor"] {
		c.Floor = c.Ceiling / 20
	} else if !(c.Floor > 0 && c.Floor <= c.Ceiling) {
		return nil, fmt.Errorf("--adaptive-floor must be more than 0 and at most --adaptive-ceiling (%s), got %v", fmtFloat(c.Ceiling), f.floor)
	}
	if err := engineLimit(c.Floor, burst); err != nil {
		return nil, fmt.Errorf("--adaptive-floor %s: %w", fmtFloat(c.Floor), err)
	}
	if err := engineLimit(c.Ceiling, burst); err != nil {
		return nil, fmt.Errorf("--adaptive-ceiling %s: %w", fmtFloat(c.Ceiling), err)
	}
	if c.LatencyTarget = f.target; f.target <= 0 || f.target > time.Minute {
		return nil, fmt.Errorf("--latency-target must be more than 0 and at most 1m, got %v", f.target)
	}
	if c.Decrease = f.decrease; given["decrease"] && !(f.decrease > 0 && f.decrease < 1) {
		return nil, fmt.Errorf("--decrease must be between 0 and 1, both excluded, got %v", f.decrease)
	}
	if c.Increase = f.increase; given["increase"] && !(f.increase > 0 && f.increase <= c.Ceiling) {
		return nil, fmt.Errorf("--increase must be more than 0 and at most --adaptive-ceiling (%s) tokens per second, got %v", fmtFloat(c.Ceiling), f.increase)
	}
	return a, nil
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
