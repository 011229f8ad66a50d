package sim

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// simConfig is what one simulation needs.
type simConfig struct {
	rate     float64
	rateText string // the rate as given, such as 600/m
	changes  []limitChange
	burst    float64
	load     float64 // requests per second, evenly spaced
	loadText string  // the load as given, such as 500/m
	cost     float64
	duration time.Duration
	interval time.Duration
	svg      string
	// start is the instant the virtual clock starts at (--start): a
	// quota's periods begin at dates of the calendar.
	start time.Time
	// bucket simulates the token bucket of rate and burst; it is also
	// simulated when no other shape is.
	bucket bool
	quota  *quotaConfig  // a calendar quota to simulate, or nil
	window *windowConfig // a strict window to simulate, or nil
	// pauses are the spans in which the client sends nothing (--pause),
	// in time order.
	pauses []pause
	// adaptive has a controller set the token bucket's rate from a
	// simulated upstream's health (--upstream-capacity); nil for none.
	adaptive *adaptiveConfig
}

// pause is one --pause: no requests from from to to (into the
// simulation).
type pause struct {
	from, to time.Duration
}

// paused reports whether at lies in one of cfg's pauses.
func (c simConfig) paused(at time.Duration) bool {
	return slices.ContainsFunc(c.pauses, func(p pause) bool { return at >= p.from && at < p.to })
}

// pauseText says when the client pauses, for the report's head and the
// chart's title: "none from 24h to 48h"; "" without pauses.
func (c simConfig) pauseText() string {
	var parts []string
	for _, p := range c.pauses {
		parts = append(parts, shortDuration(p.from)+" to "+shortDuration(p.to))
	}
	if len(parts) == 0 {
		return ""
	}
	return "none from " + strings.Join(parts, ", from ")
}

// parsePauses reads the --pause values, FROM-TO each, two times into a
// simulation of duration, FROM before TO; and returns them in time order.
func parsePauses(args []string, duration time.Duration) ([]pause, error) {
	var out []pause
	for _, arg := range args {
		from, to, found := strings.Cut(arg, "-")
		var p pause
		var err1, err2 error
		p.from, err1 = time.ParseDuration(strings.TrimSpace(from))
		p.to, err2 = time.ParseDuration(strings.TrimSpace(to))
		if !found || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("--pause: want FROM-TO, two times into the simulation such as 10s-20s; got %q", arg)
		}
		if p.from < 0 || p.from >= p.to || p.to > duration {
			return nil, fmt.Errorf("--pause %s: want 0 <= FROM < TO <= --duration (%v)", arg, shortDuration(duration))
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b pause) int { return cmp.Compare(a.from, b.from) })
	return out, nil
}

// limitChange is one --set-limit: the rate from at on.
type limitChange struct {
	at   time.Duration // into the simulation
	rate float64       // tokens per second
	text string        // the rate as given, such as 30/s
	arg  string        // the flag's value as given, such as 20s=30/s
}

// label is how the report and the chart show the change.
func (ch limitChange) label() string { return "limit → " + ch.text }

// simInterval is one row of the report.
type simInterval struct {
	start, end       time.Duration
	admitted, denied int
	// tokensLeft is what the bucket holds right after the interval's last
	// request, or at its end if it had none. The level at the very end
	// would read as a full token on a drained bucket: the refill reaches
	// one token exactly when the next interval's first request takes it.
	tokensLeft float64
	// up is what the upstream did, in an adaptive run.
	up upstreamRow
}

// sent is the interval's requests.
func (r simInterval) sent() int { return r.admitted + r.denied }

// simSample is the state right after one request, for the chart.
type simSample struct {
	at     time.Duration
	tokens float64
}

// simResult is a run of each shape, in the order of simConfig.shapes.
type simResult struct {
	runs     []shapeRun
	adaptive *adaptiveRun // an adaptive run's controller and upstream, or nil
}

// shapeRun is what one shape did with the load.
type shapeRun struct {
	kind      shapeKind
	title     string
	intervals []simInterval
	samples   []simSample // a token bucket's, only with a chart to draw (--svg)
	most      int         // the most admitted in any span of simConfig.span
}

func (r shapeRun) sent() int     { return r.admitted() + r.denied() }
func (r shapeRun) admitted() int { return r.sum(func(i simInterval) int { return i.admitted }) }
func (r shapeRun) denied() int   { return r.sum(func(i simInterval) int { return i.denied }) }

func (r shapeRun) sum(f func(simInterval) int) int {
	n := 0
	for _, i := range r.intervals {
		n += f(i)
	}
	return n
}

// maxRequests bounds a simulation's size (its time, and memory for the
// chart's samples).
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
	case c.start.Before(firstStart) || !c.start.Add(c.duration).Before(lastEnd):
		return fmt.Errorf("--start and --duration: the run must lie between %s and %s, got %s to %s",
			firstStart.Format(time.DateOnly), lastEnd.Format(time.DateOnly),
			c.start.Format(time.RFC3339), c.start.Add(c.duration).Format(time.RFC3339))
	}
	return nil
}

// The engine reads instants as nanoseconds since 1970 (time.UnixNano),
// which reach from 1678 to 2262: a run lies well within.
var (
	firstStart = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	lastEnd    = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
)

// warnings lists settings that are legal but probably not what was meant.
func (c simConfig) warnings() []string {
	var out []string
	if q := c.quota; q != nil && c.cost > q.n {
		out = append(out, fmt.Sprintf("--cost %g is above --quota %g: no period holds that many tokens, so every request will be denied", c.cost, q.n))
	}
	if w := c.window; w != nil && c.cost > w.limit {
		out = append(out, fmt.Sprintf("--cost %g is above --window-limit %g: no window holds that many tokens, so every request will be denied", c.cost, w.limit))
	}
	if !c.hasBucket() {
		return out
	}
	if c.cost > c.burst {
		out = append(out, fmt.Sprintf("--cost %g is above --burst %g: the bucket never holds that many tokens, so every request will be denied", c.cost, c.burst))
	}
	// An adaptive run's rate moves, and a burst as large as it would let
	// a second's worth of requests into the upstream's queue at once.
	if c.burst < c.rate && c.adaptive == nil {
		out = append(out, c.burstBelow("--rate "+c.rateText, c.rate))
	}
	for _, ch := range c.changes {
		if c.burst < ch.rate {
			out = append(out, c.burstBelow("--set-limit "+ch.arg, ch.rate))
		}
	}
	return out
}

// burstBelow is the warning for a burst below a rate that flag sets.
func (c simConfig) burstBelow(flag string, rate float64) string {
	fill := time.Duration(c.burst / rate * float64(time.Second)).Round(time.Millisecond)
	return fmt.Sprintf("--burst %g is below %s: legal but unusual; the bucket is full after %v of refill, "+
		"so a client that pauses longer loses refill and gets less than the rate (faucet serve's rules require a burst of at least the rate)",
		c.burst, flag, fill)
}

// parseLoad reads a load for --load: a positive count of requests per
// unit (see parsePerUnit), at most 1e9 per unit.
func parseLoad(s string) (float64, string, error) {
	return parsePerUnit(s, "a positive count of requests such as 60/s", func(n float64) bool { return n > 0 && n <= 1e9 })
}

// parseRate reads a rate for --rate and --set-limit, in tokens (see
// parsePerUnit). Only the syntax is checked: the range is the engine's.
func parseRate(s string) (float64, string, error) {
	return parsePerUnit(s, "a number of tokens per second such as 10, or per unit such as 10/s, 600/m or 1/250ms", nil)
}

// parsePerUnit reads "N/unit" (60/s, 500/m, 3/250ms, 2/h) or a bare N per
// second, and returns N per second and the text as the report shows it.
// want describes N for the error when it is not a number or, if ok is not
// nil, not ok.
func parsePerUnit(s, want string, ok func(n float64) bool) (float64, string, error) {
	s = strings.TrimSpace(s)
	num, unit, found := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || ok != nil && !ok(n) {
		return 0, "", fmt.Errorf("want %s, got %q", want, s)
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

// parseChanges reads the --set-limit values, AT=RATE each, and returns the
// changes in time order. AT must lie in [0, duration], at most one change
// at each AT, and each RATE, with burst, in the engine's domain.
func parseChanges(args []string, duration time.Duration, burst float64) ([]limitChange, error) {
	var out []limitChange
	for _, arg := range args {
		at, rate, found := strings.Cut(arg, "=")
		if !found {
			return nil, fmt.Errorf("--set-limit: want AT=RATE, a time into the simulation and the rate from then, such as 20s=30/s; got %q", arg)
		}
		ch := limitChange{arg: arg}
		var err error
		if ch.at, err = time.ParseDuration(strings.TrimSpace(at)); err != nil {
			return nil, fmt.Errorf("--set-limit %s: AT: want a duration such as 20s, got %q", arg, at)
		}
		if ch.at < 0 || ch.at > duration {
			return nil, fmt.Errorf("--set-limit %s: AT must be from 0 to --duration (%v), got %v", arg, duration, ch.at)
		}
		if ch.rate, ch.text, err = parseRate(rate); err != nil {
			return nil, fmt.Errorf("--set-limit %s: RATE: %w", arg, err)
		}
		if err := engine.CheckLimit(engine.Limit(ch.rate), burst); err != nil {
			return nil, fmt.Errorf("--set-limit %s: %w", arg, err)
		}
		for _, o := range out {
			if o.at == ch.at {
				return nil, fmt.Errorf("--set-limit %s: %v is also the time of --set-limit %s; give one rate per time", arg, ch.at, o.arg)
			}
		}
		out = append(out, ch)
	}
	slices.SortFunc(out, func(a, b limitChange) int { return cmp.Compare(a.at, b.at) })
	return out, nil
}

// simulate runs the load against each shape of cfg, each a limiter of its
// own driven on the same key at the same instants of a virtual clock that
// starts at cfg.start, changing the token bucket's limit at each of
// cfg.changes before any request or reading at or after its time.
func simulate(cfg simConfig) (simResult, error) {
	shapes, err := cfg.shapes()
	if err != nil {
		return simResult{}, err
	}
	defer func() {
		for _, s := range shapes {
			s.close()
		}
	}()
	clock := cfg.start
	pending := cfg.changes
	var ad *adaptiveRun
	if cfg.adaptive != nil {
		if ad, err = newAdaptiveRun(cfg); err != nil {
			return simResult{}, err
		}
	}
	// until applies the changes at or before at, and in an adaptive run
	// the controller's steps and the upstream's completions.
	until := func(at time.Duration) error {
		if ad != nil {
			if err := ad.until(at, shapes[0].setLimit); err != nil {
				return err
			}
		}
		for ; len(pending) > 0 && pending[0].at <= at; pending = pending[1:] {
			for _, s := range shapes {
				if s.setLimit == nil {
					continue
				}
				if err := s.setLimit(clock.Add(pending[0].at), pending[0].rate); err != nil {
					return fmt.Errorf("--set-limit %s: %w", pending[0].arg, err)
				}
			}
		}
		return nil
	}
	res := simResult{runs: make([]shapeRun, len(shapes)), adaptive: ad}
	rows := make([]simInterval, len(shapes))
	for k, s := range shapes {
		res.runs[k] = shapeRun{kind: s.kind, title: s.title}
		rows[k] = simInterval{end: cfg.interval}
	}
	// admitted holds a bit per request, per shape, for the most admitted
	// in any span: 10 million requests take 1.25 MB a shape.
	admitted := make([][]uint64, len(shapes))
	flush := func() error {
		end := rows[0].end
		if err := until(end); err != nil {
			return err
		}
		for k, s := range shapes {
			row := rows[k]
			if row.sent() == 0 {
				row.tokensLeft = s.left(clock.Add(row.end))
			}
			if ad != nil {
				row.up = ad.row(row.start)
			}
			res.runs[k].intervals = append(res.runs[k].intervals, row)
			rows[k] = simInterval{start: end, end: min(end+cfg.interval, cfg.duration)}
		}
		return nil
	}
	n := 0
	for ; ; n++ {
		at := cfg.at(n)
		if at >= cfg.duration {
			break
		}
		for at >= rows[0].end {
			if err := flush(); err != nil {
				return simResult{}, err
			}
		}
		if err := until(at); err != nil {
			return simResult{}, err
		}
		if cfg.paused(at) {
			continue
		}
		for k, s := range shapes {
			d := s.take(clock.Add(at), cfg.cost)
			row := &rows[k]
			for n/64 >= len(admitted[k]) {
				admitted[k] = append(admitted[k], 0)
			}
			if d.Allowed {
				if ad != nil {
					ad.up.send(at)
				}
				row.admitted++
				admitted[k][n/64] |= 1 << (n % 64)
			} else {
				row.denied++
			}
			row.tokensLeft = d.Remaining
			if cfg.svg != "" && s.kind == bucketShape {
				res.runs[k].samples = append(res.runs[k].samples, simSample{at: at, tokens: d.Remaining})
			}
		}
	}
	for len(shapes) > 0 && rows[0].start < cfg.duration {
		if err := flush(); err != nil {
			return simResult{}, err
		}
	}
	for k := range res.runs {
		res.runs[k].most = mostInSpan(admitted[k], n, cfg.at, cfg.span())
	}
	if ad != nil {
		ad.stats = ad.ctl.Stats()
	}
	return res, nil
}

// at is the time of request i into the simulation. It is computed per
// request, not as i*gap, so rounding never accumulates.
func (cfg simConfig) at(i int) time.Duration {
	return time.Duration(math.Round(float64(i) * 1e9 / cfg.load))
}

// mostInSpan is the most requests admitted in any span of length span,
// of the n requests at at(0) to at(n-1), bit i of admitted set for each
// admitted request i (admitted may end before n, where none was): the
// count in (at(i)-span, at(i)], at its largest.
func mostInSpan(admitted []uint64, n int, at func(int) time.Duration, span time.Duration) int {
	bit := func(i int) bool { return i/64 < len(admitted) && admitted[i/64]&(1<<(i%64)) != 0 }
	most, count, first := 0, 0, 0
	for i := range n {
		if !bit(i) {
			continue
		}
		count++
		for ; at(i)-at(first) >= span; first++ {
			if bit(first) {
				count--
			}
		}
		most = max(most, count)
	}
	return most
}

// report writes the run: for one shape a table of its intervals, for more
// a table of them side by side; then a summary line for each.
func report(w io.Writer, cfg simConfig, res simResult) {
	if cfg.adaptive != nil {
		reportAdaptive(w, cfg, res)
		return
	}
	if len(res.runs) == 1 && res.runs[0].kind == bucketShape {
		fmt.Fprintf(w, "rate %s, burst %g, load %s (cost %g), %s in steps of %s\n",
			cfg.rateText, cfg.burst, cfg.loadText, cfg.cost, shortDuration(cfg.duration), shortDuration(cfg.interval))
	} else {
		fmt.Fprintf(w, "load %s (cost %g), %s in steps of %s, from %s\n",
			cfg.loadText, cfg.cost, shortDuration(cfg.duration), shortDuration(cfg.interval), cfg.start.Format(time.RFC3339))
		for _, r := range res.runs {
			fmt.Fprintln(w, r.title)
		}
	}
	for _, ch := range cfg.changes {
		fmt.Fprintf(w, "at %v: %s\n", ch.at, ch.label())
	}
	for _, p := range cfg.pauses {
		fmt.Fprintf(w, "from %s to %s: no requests\n", shortDuration(p.from), shortDuration(p.to))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(res.runs) == 1 {
		left := "tokens left"
		if res.runs[0].kind != bucketShape {
			left = "left"
		}
		fmt.Fprintf(tw, "from\tto\tsent\tadmitted\tdenied\t%s\t\n", left)
		var sent, admitted, denied int
		for _, r := range res.runs[0].intervals {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.3f\t\n", shortDuration(r.start), shortDuration(r.end), r.sent(), r.admitted, r.denied, r.tokensLeft)
			sent, admitted, denied = sent+r.sent(), admitted+r.admitted, denied+r.denied
		}
		fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t\t\n", sent, admitted, denied)
	} else {
		// Two header rows: the shape over its pair of columns.
		fmt.Fprint(tw, "\t\t")
		for _, r := range res.runs {
			fmt.Fprintf(tw, "\t%s\t", shortName[r.kind])
		}
		fmt.Fprint(tw, "\nfrom\tto\tsent")
		for range res.runs {
			fmt.Fprint(tw, "\tadmitted\tdenied")
		}
		fmt.Fprintln(tw, "\t")
		for i, r := range res.runs[0].intervals {
			fmt.Fprintf(tw, "%s\t%s\t%d", shortDuration(r.start), shortDuration(r.end), r.sent())
			for _, run := range res.runs {
				fmt.Fprintf(tw, "\t%d\t%d", run.intervals[i].admitted, run.intervals[i].denied)
			}
			fmt.Fprintln(tw, "\t")
		}
		fmt.Fprintf(tw, "total\t\t%d", res.runs[0].sent())
		for _, run := range res.runs {
			fmt.Fprintf(tw, "\t%d\t%d", run.admitted(), run.denied())
		}
		fmt.Fprintln(tw, "\t")
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range res.runs {
		fmt.Fprintf(w, "%s: admitted %d, denied %d, most in any %s: %d\n",
			r.title, r.admitted(), r.denied(), shortDuration(cfg.span()), r.most)
	}
}

// shortName heads a shape's columns in a table side by side.
var shortName = map[shapeKind]string{bucketShape: "bucket", quotaShape: "quota", windowShape: "window"}
