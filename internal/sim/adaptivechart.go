package sim

import (
	"math"
	"strconv"
)

// adaptiveChart is an adaptive run drawn as two panels over one time axis,
// in seconds: the requests (top) and the upstream's latency (bottom).
//
// The top panel has, for each interval, the requests admitted and those
// that timed out, per second, as bars the width of the interval, the
// timeouts over the admitted; the adaptive rate as a
// stepped line; and the upstream's capacity as a dashed line. The bottom
// panel has the p99 latency of each interval's responses as a stepped
// line, on a log scale (it spans milliseconds to the timeout), and the
// target as a dashed line. Each panel's legend is in its top right corner,
// above the data.
//
// As for chart, everything is placed here, in points on the page; svg.go
// only writes it out.
type adaptiveChart struct {
	title              string
	pauses             []span
	counts, latency    panel
	bars               []bar   // admitted and timed out, per second
	rate, capacity     []point // requests per second
	p99                []point // log10 of milliseconds, less latency's floor
	target             float64 // as p99
	countsLegend       box
	latencyLegend      box
	countsNames        [4]string
	latencyNames       [2]string
	xLabel             string
	countsY, latencyY  string
	latencyFloorMillis float64 // the bottom of the latency axis
}

// Adaptive chart geometry, in points: the same page and left and right
// ends as chart, the top panel taller.
const (
	adaptiveCountsTop, adaptiveCountsBottom   = 30.0, 226.0
	adaptiveLatencyTop, adaptiveLatencyBottom = 250.0, 394.0
)

// Colours of the adaptive chart's lines, as SVG style declarations.
const (
	capacityColor = "#2ca02c"
	latencyColor  = "#9467bd"
	admitLight    = "#aec7e8" // admitted under the lines: light, so the lines stand out
	capacityStyle = "fill:none;stroke:" + capacityColor + ";stroke-width:1.5;stroke-dasharray:6,3"
	p99Style      = "fill:none;stroke:" + latencyColor + ";stroke-width:1.5;stroke-linejoin:round"
	targetStyle   = "fill:none;stroke:" + denyColor + ";stroke-width:1;stroke-dasharray:4,3"
)

// newAdaptiveChart places an adaptive run.
func newAdaptiveChart(cfg simConfig, res simResult) *adaptiveChart {
	a := cfg.adaptive
	end := cfg.duration.Seconds()
	run := res.runs[0]
	c := &adaptiveChart{
		title: "adaptive rate " + fmtRate(a.ctl.Floor) + " to " + fmtRate(a.ctl.Ceiling) + "/s, p99 target " +
			a.ctl.LatencyTarget.String() + ", load " + cfg.loadText + ", burst " + strconv.FormatFloat(cfg.burst, 'g', -1, 64),
		pauses:       pauseSpans(cfg),
		xLabel:       "time (s)",
		countsY:      "requests per second",
		latencyY:     "p99 (ms, log scale)",
		countsNames:  [4]string{"admitted", "timed out", "adaptive rate", "upstream capacity"},
		latencyNames: [2]string{"p99 latency", "target " + a.ctl.LatencyTarget.String()},
	}
	xTicks := niceTicks(0, end)
	if len(run.intervals) <= maxIntervalTicks {
		xTicks = intervalTicks(run.intervals)
	}

	// Top: per second, so that the bars and the lines share a unit
	// whatever the interval.
	var top float64
	for _, r := range run.intervals {
		// Bars the width of their interval, the timeouts over the
		// admitted: an area under the lines rather than stripes between
		// them, however many intervals.
		from, to := r.start.Seconds(), r.end.Seconds()
		secs := to - from
		admitted, failed := float64(r.admitted)/secs, float64(r.up.failed)/secs
		c.bars = append(c.bars,
			bar{from: from, to: to, count: admitted},
			bar{from: from, to: to, count: failed, denied: true})
		top = max(top, admitted, failed)
	}
	c.rate = stepLine(res.adaptive.rates, end)
	var caps []point
	for _, s := range a.capacity {
		caps = append(caps, point{s.at.Seconds(), s.rate})
	}
	c.capacity = stepLine(caps, end)
	for _, p := range append(c.rate, c.capacity...) {
		top = max(top, p.y)
	}
	c.countsLegend = legendBox(adaptiveCountsTop, c.countsNames[:])
	c.counts = panel{
		area: box{plotLeft, adaptiveCountsTop, plotRight, adaptiveCountsBottom},
		xMax: end, yMax: raiseFor(max(1, top), adaptiveCountsTop, adaptiveCountsBottom, c.countsLegend),
		xTicks: xTicks, yLabel: c.countsY,
	}
	c.counts.yTicks = countTicks(c.counts.yMax)

	// Bottom: log10 of milliseconds, from the power of ten at or below the
	// lowest p99 (and the target) to the one at or above the highest.
	target := float64(a.ctl.LatencyTarget) / 1e6
	lo, hi := target, target
	for _, r := range run.intervals {
		if r.up.answered+r.up.failed > 0 {
			ms := max(float64(r.up.p99)/1e6, 0.001)
			lo, hi = min(lo, ms), max(hi, ms)
		}
	}
	loExp, hiExp := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if math.Log10(lo)-loExp < 0.15 {
		// A p99 at the bottom would lie on the axis, out of sight.
		loExp--
	}
	if hiExp == loExp {
		hiExp++
	}
	c.latencyFloorMillis = math.Pow(10, loExp)
	logY := func(ms float64) float64 { return math.Log10(ms) - loExp }
	for _, r := range run.intervals {
		if r.up.answered+r.up.failed == 0 {
			continue
		}
		y := logY(max(float64(r.up.p99)/1e6, 0.001))
		c.p99 = append(c.p99, point{r.start.Seconds(), y}, point{r.end.Seconds(), y})
	}
	c.target = logY(target)
	c.latencyLegend = legendBox(adaptiveLatencyTop, c.latencyNames[:])
	c.latency = panel{
		area: box{plotLeft, adaptiveLatencyTop, plotRight, adaptiveLatencyBottom},
		xMax: end, yMax: raiseFor(hiExp-loExp, adaptiveLatencyTop, adaptiveLatencyBottom, c.latencyLegend),
		xTicks: xTicks, yLabel: c.latencyY,
	}
	c.latency.yLabelSize = fitSize(c.latencyY, axisSize, adaptiveLatencyBottom-adaptiveLatencyTop)
	for e := loExp; e <= hiExp; e++ {
		c.latency.yTicks = append(c.latency.yTicks, tick{e - loExp, formatTick(math.Pow(10, e), 3)})
	}
	return c
}

// stepLine is a rate that holds from each point to the next, as a line of
// steps to end: two points at each change.
func stepLine(pts []point, end float64) []point {
	var out []point
	for i, p := range pts {
		if i > 0 {
			out = append(out, point{p.x, pts[i-1].y})
		}
		out = append(out, p)
	}
	if len(pts) > 0 {
		out = append(out, point{end, pts[len(pts)-1].y})
	}
	return out
}

// legendBox is the legend of names in the top right corner of a panel
// whose data area starts at top.
func legendBox(top float64, names []string) box {
	var w float64
	for _, n := range names {
		w = max(w, textWidth(n, fontSize))
	}
	right := plotRight - legendSlack
	return box{minX: right - swatchWidth - swatchGap - w, minY: top + legendMargin,
		maxX: right, maxY: top + legendMargin + float64(len(names))*legendRow}
}

// raiseFor is the top of a Y axis whose data reach yMax, raised so that
// they end below the legend of a panel from top to bottom.
func raiseFor(yMax, top, bottom float64, legend box) float64 {
	h := bottom - top
	if below := bottom - legend.maxY - legendMargin; below >= h/4 {
		return yMax * h / below
	}
	return yMax
}

// latencyMillis is the latency a point of the bottom panel stands for, in
// milliseconds.
func (c *adaptiveChart) latencyMillis(y float64) float64 {
	return c.latencyFloorMillis * math.Pow(10, y)
}
