package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// shapeKind is a shape of limit the simulator runs: each is the engine's
// own limiter.
type shapeKind int

const (
	bucketShape shapeKind = iota // engine.Engine
	quotaShape                   // engine.Quota
	windowShape                  // engine.Window
)

// quotaConfig is a calendar quota to simulate: --quota, --period,
// --time-zone and the anchor flags.
type quotaConfig struct {
	n    float64
	cal  engine.Calendar
	zone string // the zone as given, "" for UTC
}

// windowConfig is a strict window to simulate: --window-limit, --window
// and --slots.
type windowConfig struct {
	limit     float64
	limitText string // as given
	span      time.Duration
	slots     int // 0 is the engine's default
}

// shape is one limiter under simulation, fed the run's load on one key.
type shape struct {
	kind shapeKind
	// title names the shape and its parameters, for the report and the
	// chart: "token bucket: rate 10/s, burst 50".
	title string
	// take decides a request of cost at t; left is what the limiter would
	// let the key take at t, taking nothing.
	take  func(t time.Time, cost float64) engine.Decision
	left  func(t time.Time) float64
	close func()
	// setLimit changes a token bucket's rate (--set-limit); nil for the
	// other shapes.
	setLimit func(t time.Time, rate float64) error
}

// simKey is the one key every shape is driven on.
const simKey = "client"

// shapes are the limiters cfg simulates, in the order the report and the
// chart show them: the token bucket, the calendar quota, the strict window.
// The caller closes them.
func (cfg simConfig) shapes() ([]shape, error) {
	var out []shape
	closeAll := func() {
		for _, s := range out {
			s.close()
		}
	}
	if cfg.hasBucket() {
		e, err := engine.New(engine.Config{Limit: engine.Limit(cfg.rate), Burst: cfg.burst, SweepInterval: -1})
		if err != nil {
			return nil, err
		}
		out = append(out, shape{
			kind:  bucketShape,
			title: cfg.bucketTitle(),
			take:  func(t time.Time, cost float64) engine.Decision { return e.AllowAt(t, simKey, cost) },
			left:  func(t time.Time) float64 { return e.TokensAt(t, simKey) },
			close: func() { e.Close() },
			setLimit: func(t time.Time, rate float64) error {
				return e.SetLimitAt(t, engine.Limit(rate))
			},
		})
	}
	if q := cfg.quota; q != nil {
		qt, err := engine.NewQuota(engine.QuotaConfig{Quota: q.n, Calendar: q.cal, SweepInterval: -1})
		if err != nil {
			closeAll()
			return nil, err
		}
		out = append(out, shape{
			kind:  quotaShape,
			title: q.title(),
			take:  func(t time.Time, cost float64) engine.Decision { return qt.TakeAt(t, simKey, cost, nil) },
			left:  func(t time.Time) float64 { return qt.TakeAt(t, simKey, 0, nil).Remaining },
			close: func() { qt.Close() },
		})
	}
	if w := cfg.window; w != nil {
		wd, err := engine.NewWindow(engine.WindowConfig{Limit: w.limit, Window: w.span, Slots: w.slots, SweepInterval: -1})
		if err != nil {
			closeAll()
			return nil, err
		}
		out = append(out, shape{
			kind:  windowShape,
			title: w.title(),
			take:  func(t time.Time, cost float64) engine.Decision { return wd.TakeAt(t, simKey, cost) },
			left:  func(t time.Time) float64 { return wd.TakeAt(t, simKey, 0).Remaining },
			close: func() { wd.Close() },
		})
	}
	return out, nil
}

// hasBucket reports whether cfg simulates the token bucket: if asked to,
// or if it simulates no other shape.
func (cfg simConfig) hasBucket() bool {
	return cfg.bucket || cfg.quota == nil && cfg.window == nil
}

// bucketTitle is the token bucket's title.
func (cfg simConfig) bucketTitle() string {
	if a := cfg.adaptive; a != nil {
		return "token bucket: adaptive rate " + fmtRate(a.ctl.Floor) + "/s to " + fmtRate(a.ctl.Ceiling) + "/s, burst " + strconv.FormatFloat(cfg.burst, 'g', -1, 64)
	}
	rate := cfg.rateText
	if len(cfg.changes) > 0 {
		rate += " (changes marked)"
	}
	return "token bucket: rate " + rate + ", burst " + strconv.FormatFloat(cfg.burst, 'g', -1, 64)
}

// title is the quota's title: "calendar quota: 100 a day from 09:00
// (Europe/Berlin)".
func (q *quotaConfig) title() string {
	c := q.cal
	var anchor string
	switch c.Period {
	case engine.Weekly:
		anchor = " from " + weekdays[max(c.Weekday, 1)-1]
	case engine.Monthly:
		anchor = " from day " + strconv.Itoa(max(c.Day, 1))
	case engine.Yearly:
		anchor = fmt.Sprintf(" from %s %d", time.Month(max(int(c.Month), 1)), max(c.Day, 1))
	}
	if c.Hour != 0 || c.Period == engine.Daily {
		anchor += fmt.Sprintf(" %02d:00", c.Hour)
	}
	zone := "UTC"
	if q.zone != "" {
		zone = q.zone
	}
	return fmt.Sprintf("calendar quota: %s a %s%s (%s)", strconv.FormatFloat(q.n, 'f', -1, 64), c.Period, anchor, zone)
}

// title is the window's title: "strict window: 100 in any 24h (16 slots)".
func (w *windowConfig) title() string {
	slots := w.slots
	if slots == 0 {
		slots = 16
	}
	return fmt.Sprintf("strict window: %s in any %s (%d slots)", strconv.FormatFloat(w.limit, 'f', -1, 64), shortDuration(w.span), slots)
}

// shortDuration is d without the zero units a Duration prints: 24h, not
// 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// weekdays are the names --anchor-weekday takes, as the rules spell them,
// Monday first as ISO 8601 numbers them.
var weekdays = [...]string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

// parseWeekday reads --anchor-weekday: a name, monday to sunday.
func parseWeekday(s string) (int, error) {
	for i, name := range weekdays {
		if strings.EqualFold(s, name) {
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("want monday to sunday, got %q", s)
}

// flagErrors turns the engine's *LimitErrors in err into one error per
// field, each naming the flag that set it (flags maps the engine's field
// names to flags); an error that is no *LimitError is kept as it is.
func flagErrors(err error, flags map[string]string) []error {
	if err == nil {
		return nil
	}
	les := engine.LimitErrors(err)
	if len(les) == 0 {
		return []error{err}
	}
	out := make([]error, len(les))
	for i, le := range les {
		flag, ok := flags[le.Field]
		if !ok {
			flag = le.Field
		}
		out[i] = fmt.Errorf("%s: %w", flag, le)
	}
	return out
}

// The flags of the engine's fields, shape by shape.
var (
	bucketFlags = map[string]string{"Limit": "--rate", "Burst": "--burst", "Burst/Limit": "--burst/--rate"}
	quotaFlags  = map[string]string{"Quota": "--quota", "Period": "--period", "Hour": "--anchor-hour",
		"Day": "--anchor-day", "Weekday": "--anchor-weekday", "Month": "--anchor-month"}
	windowFlags = map[string]string{"Limit": "--window-limit", "Window": "--window", "Slots": "--slots"}
)

// checkShapes checks each shape's parameters with the engine's own checks,
// and returns every problem, each naming its flag.
func (cfg simConfig) checkShapes() []error {
	var errs []error
	if cfg.hasBucket() {
		errs = append(errs, flagErrors(engine.CheckLimit(engine.Limit(cfg.rate), cfg.burst), bucketFlags)...)
	}
	if q := cfg.quota; q != nil {
		errs = append(errs, flagErrors(engine.CheckQuota(q.n, q.cal), quotaFlags)...)
	}
	if w := cfg.window; w != nil {
		errs = append(errs, flagErrors(engine.CheckWindow(w.limit, w.span, w.slots), windowFlags)...)
	}
	return errs
}

// span is what the summary counts the most admitted in: the window's span,
// else the quota's period at its nominal length, else the report interval.
func (cfg simConfig) span() time.Duration {
	switch {
	case cfg.window != nil:
		return cfg.window.span
	case cfg.quota != nil:
		return cfg.quota.cal.Period.Nominal()
	}
	return cfg.interval
}
