package sim

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// chart is a simulation drawn as two panels over one time axis, in
// seconds from 0 to the end of the simulation: the tokens left after each
// request (top), and the requests admitted and denied in each interval
// (bottom), as bars that span their interval, so that a moment lines up
// in both. The rate is a line over the bars, in requests per interval, and
// each --set-limit a dashed line across both panels where that line steps,
// labelled at the top of the tokens panel.
//
// Everything is placed here, in points on the page with y growing
// downwards as in SVG; svg.go only writes it out.
type chart struct {
	title          string
	pauses         []span // the client's pauses, shaded in both panels
	tokens, counts panel
	tokenLine      []point // seconds, tokens after a request
	bars           []bar
	rate           []point // seconds, requests per interval
	ceiling        float64 // the rate line is cut off above it
	changes        []float64
	labels         []string // one for each change
	labelBoxes     []box    // their grounds, in the tokens panel
	legend         box
	legendNames    [3]string // admitted, denied, rate
}

// point is a point of data: x in seconds, y in the panel's unit.
type point struct{ x, y float64 }

// box is a rectangle on the page, in points.
type box struct{ minX, minY, maxX, maxY float64 }

// overlap reports whether a and b share more than an edge.
func overlap(a, b box) bool {
	return a.minX < b.maxX && b.minX < a.maxX && a.minY < b.maxY && b.minY < a.maxY
}

// span is a stretch of time, from and to in seconds.
type span struct{ from, to float64 }

// pauseSpans are cfg's pauses, in seconds.
func pauseSpans(cfg simConfig) []span {
	var out []span
	for _, p := range cfg.pauses {
		out = append(out, span{p.from.Seconds(), p.to.Seconds()})
	}
	return out
}

// bar is one interval's admitted or denied requests, from and to in seconds.
type bar struct {
	from, to, count float64
	denied          bool
}

// tick is a mark on an axis, at value in the axis's unit.
type tick struct {
	value float64
	label string
}

// panel is one plot: its data area on the page and the ranges it maps onto
// it, both from 0.
type panel struct {
	area           box
	xMax, yMax     float64
	xTicks, yTicks []tick
	yLabel         string
	yLabelSize     float64 // 0 is axisSize
}

// x is where time t, in seconds, lies on the page.
func (p panel) x(t float64) float64 {
	return p.area.minX + t/p.xMax*(p.area.maxX-p.area.minX)
}

// y is where v lies on the page.
func (p panel) y(v float64) float64 {
	return p.area.maxY - v/p.yMax*(p.area.maxY-p.area.minY)
}

// Chart geometry, in points: the page (8 by 6 inches), the panels' data
// areas, which share their left and right ends so that the time axes line
// up, and the type sizes.
const (
	chartWidth, chartHeight = 576.0, 432.0
	plotLeft, plotRight     = 64.0, 560.0
	tokensTop, tokensBottom = 30.0, 196.0
	countsTop, countsBottom = 232.0, 394.0
	titleSize, axisSize     = 12.0, 11.0
	fontSize                = 10.0 // ticks, labels and legend
)

// Layout within the panels: the space between bars (a fraction of an
// interval, on each side of its pair of bars), the legend's rows and the
// room around it.
const (
	barGap       = 0.1
	legendRow    = 13.0
	swatchWidth  = 16.0
	swatchGap    = 4.0
	legendMargin = 4.0
	legendSlack  = 12.0 // right of the labels: room for a wider font
)

// Labels of changes: the space between a mark and its label, the label's
// margin within its ground, and the room for a font wider than the
// estimate.
const (
	labelGap   = 3.0
	labelPad   = 2.0
	labelSlack = 0.15 // of the label's width
)

// fitSize is size, or less if s set in it would be wider than width.
func fitSize(s string, size, width float64) float64 {
	if w := textWidth(s, size); w > width {
		return size * width / w
	}
	return size
}

// textWidth estimates the width of s in points. The chart names a family
// of common sans-serif fonts, and the viewer picks one; this is a generous
// average advance for them, and labels and legend leave slack besides.
func textWidth(s string, size float64) float64 {
	return 0.6 * size * float64(utf8.RuneCountInString(s))
}

// newChart draws a token bucket's run, the only shape of cfg.
func newChart(cfg simConfig, res shapeRun) *chart {
	end := cfg.duration.Seconds()
	c := &chart{}
	rate := cfg.rateText
	if len(cfg.changes) > 0 {
		rate += " (changes marked)"
	}
	c.title = "rate " + rate + ", burst " + strconv.FormatFloat(cfg.burst, 'g', -1, 64) + ", load " + cfg.loadText
	if p := cfg.pauseText(); p != "" {
		c.title += ", " + p
	}
	c.pauses = pauseSpans(cfg)

	xTicks := niceTicks(0, end)
	if len(res.intervals) <= maxIntervalTicks {
		xTicks = intervalTicks(res.intervals)
	}
	c.tokens = panel{
		area: box{plotLeft, tokensTop, plotRight, tokensBottom},
		xMax: end, yMax: cfg.burst, xTicks: xTicks, yTicks: niceTicks(0, cfg.burst),
		yLabel: "tokens after request",
	}
	c.tokenLine = make([]point, len(res.samples))
	for i, s := range res.samples {
		c.tokenLine[i] = point{s.at.Seconds(), s.tokens}
	}
	c.tokenLine = thin(c.tokenLine, c.tokens.x)
	for _, ch := range cfg.changes {
		c.changes = append(c.changes, ch.at.Seconds())
		c.labels = append(c.labels, ch.label())
	}
	c.labelBoxes = labelBoxes(c.tokens, c.changes, c.labels)

	var maxCount float64
	for _, r := range res.intervals {
		from, to := r.start.Seconds(), r.end.Seconds()
		gap := (to - from) * barGap
		mid := (from + to) / 2
		c.bars = append(c.bars,
			bar{from: from + gap, to: mid, count: float64(r.admitted)},
			bar{from: mid, to: to - gap, count: float64(r.denied), denied: true})
		maxCount = max(maxCount, float64(r.admitted), float64(r.denied))
	}
	c.rate = rateLine(cfg)
	// The rate line sets the scale only up to rateRoom times the tallest
	// bar: a limit far above the load would flatten the bars. Above that,
	// the line is cut off, below the legend; the labels still give the
	// rate.
	room := rateRoom * max(1, maxCount)
	for _, p := range c.rate {
		maxCount = max(maxCount, min(p.y, room))
	}
	c.ceiling = maxCount

	c.legendNames = [3]string{"admitted", "denied", "rate"}
	if cfg.cost != 1 {
		c.legendNames[2] = "rate / cost"
	}
	var names float64
	for _, n := range c.legendNames {
		names = max(names, textWidth(n, fontSize))
	}
	right := plotRight - legendSlack
	c.legend = box{
		minX: right - swatchWidth - swatchGap - names, minY: countsTop + legendMargin,
		maxX: right, maxY: countsTop + legendMargin + float64(len(c.legendNames))*legendRow,
	}
	// The legend is in the top right corner of the panel: raise the Y
	// axis until the tallest bar, and the rate line, end below it.
	h := countsBottom - countsTop
	yMax := max(1, maxCount)
	if below := countsBottom - c.legend.maxY - legendMargin; below >= h/4 {
		yMax *= h / below
	}
	c.counts = panel{
		area: box{plotLeft, countsTop, plotRight, countsBottom},
		xMax: end, yMax: yMax, xTicks: xTicks, yTicks: niceTicks(0, yMax),
		yLabel: "requests per " + cfg.interval.String(),
	}
	return c
}

// rateRoom is how far above the tallest bar the bottom panel reaches to
// show the rate line.
const rateRoom = 2

// rateLine is the rate in force over time, in requests per interval: what
// the limit admits in an interval once the burst is spent. It steps at
// each change: two points at the change's time.
func rateLine(cfg simConfig) []point {
	perInterval := func(rate float64) float64 { return rate * cfg.interval.Seconds() / cfg.cost }
	pts := []point{{0, perInterval(cfg.rate)}}
	for _, ch := range cfg.changes {
		at := ch.at.Seconds()
		pts = append(pts, point{at, pts[len(pts)-1].y}, point{at, perInterval(ch.rate)})
	}
	return append(pts, point{cfg.duration.Seconds(), pts[len(pts)-1].y})
}

// labelBoxes are the grounds of the labels of changes at xs (seconds): at
// the top of p, right of its mark, or left of it where the panel ends
// first; a label that would run into one already placed moves down a row,
// as far as the panel goes.
func labelBoxes(p panel, xs []float64, text []string) []box {
	h := fontSize*1.25 + 2*labelPad
	var out []box
	for i, x := range xs {
		w := textWidth(text[i], fontSize)*(1+labelSlack) + 2*labelPad
		left := p.x(x) + labelGap
		if left+w > p.area.maxX {
			left = max(p.area.minX, p.x(x)-labelGap-w)
		}
		b := box{minX: left, minY: p.area.minY, maxX: left + w, maxY: p.area.minY + h}
		for slices.ContainsFunc(out, func(o box) bool { return overlap(o, b) }) && b.maxY+h <= p.area.maxY {
			b.minY += h
			b.maxY += h
		}
		out = append(out, b)
	}
	return out
}

// maxIntervalTicks is the most intervals whose bounds are all labelled on
// the time axis; with more, the labels would run into each other.
const maxIntervalTicks = 12

// intervalTicks labels the time axis at the bounds of the intervals, in
// seconds, so that each pair of bars sits between two labels.
func intervalTicks(intervals []simInterval) []tick {
	ticks := []tick{{0, "0"}}
	for _, r := range intervals {
		ticks = append(ticks, tick{r.end.Seconds(), strconv.FormatFloat(r.end.Seconds(), 'g', -1, 64)})
	}
	return ticks
}

// thin keeps, of the points that fall in one column of the page (a
// quarter of a point wide), the first, the last, the lowest and the
// highest, in their order: the line looks the same, and the file stays
// small however many requests the simulation sent.
func thin(pts []point, x func(float64) float64) []point {
	const perPoint = 4
	var out []point
	for i := 0; i < len(pts); {
		col := math.Floor(x(pts[i].x) * perPoint)
		lo, hi, j := i, i, i+1
		for ; j < len(pts) && math.Floor(x(pts[j].x)*perPoint) == col; j++ {
			if pts[j].y < pts[lo].y {
				lo = j
			}
			if pts[j].y > pts[hi].y {
				hi = j
			}
		}
		keep := []int{i, lo, hi, j - 1}
		slices.Sort(keep)
		for _, k := range slices.Compact(keep) {
			out = append(out, pts[k])
		}
		i = j
	}
	return out
}
