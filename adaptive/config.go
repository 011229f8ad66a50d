package adaptive

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("adaptive: invalid config")

// Config describes a Controller. Floor, Ceiling and LatencyTarget are
// required; the zero value of every other field picks the default its
// comment gives.
type Config struct {
	// Floor and Ceiling bound the rate, in tokens per second:
	// 0 < Floor <= Ceiling <= 1e9. The rate never leaves them, whatever
	// the upstream does.
	Floor, Ceiling float64
	// Initial is the rate before the first step, from Floor to Ceiling.
	// 0 picks Ceiling: the controller starts out of the way, and the first
	// unhealthy step brings it down to what the upstream serves.
	Initial float64
	// LatencyTarget is the latency, at Percentile, above which the upstream
	// is unhealthy: more than 0 and at most 1 minute.
	LatencyTarget time.Duration
	// Percentile is the share of observations whose latency is judged
	// against LatencyTarget, in (0, 1). 0 picks 0.99.
	Percentile float64
	// ErrorRate is the share of failed observations above which the
	// upstream is unhealthy, in (0, 1]; 1 never judges by errors. 0 picks
	// 0.05: a healthy upstream fails far less often, and an overloaded one
	// that sheds load fails far more.
	ErrorRate float64
	// Window is how far back a step looks: the observations of the last
	// Window/Interval steps (rounded up), or of the steps since the
	// upstream was last found unhealthy if fewer. 0 picks 5 Intervals: long
	// enough to gather evidence, short enough to forget a spike soon. At
	// least Interval, at most 100 Intervals.
	Window time.Duration
	// Interval is how often the caller means to call Step: more than 0 and
	// at most 1 hour. 0 picks 1 s. The controller reacts within one or two
	// Intervals.
	Interval time.Duration
	// Decrease is the factor an unhealthy step applies, in (0, 1), to the
	// rate the upstream served (or the rate, if lower). 0 picks 0.7: the
	// new rate is 30 % under what the upstream could take, so the queue
	// that built up drains at 30 % of its capacity, and the sawtooth of
	// increases and decreases that follows averages about 85 % of it
	// (0.5 would drain faster but average 75 %).
	Decrease float64
	// Increase is what a healthy step adds to the rate, in tokens per
	// second: more than 0 and at most Ceiling. 0 picks Ceiling/50, which
	// climbs from the floor to the ceiling in at most 50 steps (50 s at
	// the default Interval) and overshoots the upstream's capacity by at
	// most 2 % of the ceiling in a step.
	Increase float64
	// MinSamples is the fewest observations a step judges: with fewer the
	// rate holds, as there is no evidence either way. 0 picks
	// max(20, 1/(1-Percentile)), 100 for the default Percentile: with
	// fewer, the percentile is the largest observation.
	MinSamples int
}

// Bounds of Config's fields.
const (
	maxRate      = 1e9
	maxTarget    = time.Minute
	maxInterval  = time.Hour
	maxSteps     = 100 // Window/Interval
	defaultSteps = 5
)

// settings is a Config with its defaults filled in.
type settings struct {
	Config
	steps int // Window/Interval, rounded up
}

func invalid(field, must string, got any) error {
	return &FieldError{Field: field, Must: must, Got: fmt.Sprint(got)}
}

// FieldError is the error of a Config field out of range: Field (as
// Config names it) must Must, and holds Got. It wraps ErrInvalidConfig.
type FieldError struct {
	Field, Must, Got string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: %s must %s, got %s", ErrInvalidConfig, e.Field, e.Must, e.Got)
}

func (e *FieldError) Unwrap() error { return ErrInvalidConfig }

// check validates cfg and fills in its defaults. It reports the first
// field at fault, in the order of Config.
func (cfg Config) check() (settings, error) {
	s := settings{Config: cfg}
	c := &s.Config
	if !(c.Floor > 0 && c.Floor <= maxRate) {
		return s, invalid("Floor", "be more than 0 and at most 1e9 tokens per second", c.Floor)
	}
	if !(c.Ceiling >= c.Floor && c.Ceiling <= maxRate) {
		return s, invalid("Ceiling", "be from Floor ("+fmtFloat(c.Floor)+") to 1e9 tokens per second", c.Ceiling)
	}
	if c.Initial == 0 {
		c.Initial = c.Ceiling
	}
	if !(c.Initial >= c.Floor && c.Initial <= c.Ceiling) {
		return s, invalid("Initial", "be 0 (Ceiling) or from Floor ("+fmtFloat(c.Floor)+") to Ceiling ("+fmtFloat(c.Ceiling)+")", c.Initial)
	}
	if c.LatencyTarget <= 0 || c.LatencyTarget > maxTarget {
		return s, invalid("LatencyTarget", "be more than 0 and at most 1m0s", c.LatencyTarget)
	}
	if c.Percentile == 0 {
		c.Percentile = 0.99
	}
	if !(c.Percentile > 0 && c.Percentile < 1) {
		return s, invalid("Percentile", "be 0 (0.99) or between 0 and 1, both excluded", c.Percentile)
	}
	if c.ErrorRate == 0 {
		c.ErrorRate = 0.05
	}
	if !(c.ErrorRate > 0 && c.ErrorRate <= 1) {
		return s, invalid("ErrorRate", "be 0 (0.05) or more than 0 and at most 1", c.ErrorRate)
	}
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.Interval < 0 || c.Interval > maxInterval {
		return s, invalid("Interval", "be 0 (1s) or more than 0 and at most 1h0m0s", c.Interval)
	}
	if c.Window == 0 {
		c.Window = defaultSteps * c.Interval
	}
	if c.Window < c.Interval || c.Window > maxSteps*c.Interval {
		return s, invalid("Window", "be 0 (5 Intervals) or from Interval ("+c.Interval.String()+") to 100 Intervals ("+(maxSteps*c.Interval).String()+")", c.Window)
	}
	s.steps = int((c.Window + c.Interval - 1) / c.Interval)
	if c.Decrease == 0 {
		c.Decrease = 0.7
	}
	if !(c.Decrease > 0 && c.Decrease < 1) {
		return s, invalid("Decrease", "be 0 (0.7) or between 0 and 1, both excluded", c.Decrease)
	}
	if c.Increase == 0 {
		c.Increase = c.Ceiling / 50
	}
	if !(c.Increase > 0 && c.Increase <= c.Ceiling) {
		return s, invalid("Increase", "be 0 (Ceiling/50) or more than 0 and at most Ceiling ("+fmtFloat(c.Ceiling)+") tokens per second", c.Increase)
	}
	if c.MinSamples == 0 {
		c.MinSamples = max(20, int(math.Ceil(1/(1-c.Percentile)-1e-9)))
	}
	if c.MinSamples < 0 || c.MinSamples > maxSamples {
		return s, invalid("MinSamples", "be 0 (the default) or from 1 to 1e9", c.MinSamples)
	}
	return s, nil
}

// maxSamples bounds MinSamples: more would never be judged.
const maxSamples = 1_000_000_000

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
