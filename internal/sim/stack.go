package sim

import (
	"math"
	"slices"
	"time"
)

// stack is a run of several shapes, or of one that is not a token bucket,
// drawn as one panel per shape, stacked over one time axis: the requests
// each admitted and denied in each interval, as bars on one scale for all,
// so that the shapes compare at a glance. The token bucket's and the
// window's long-run rate is a line over the bars; a quota's new periods,
// and a token bucket's --set-limit changes, are dashed marks.
//
// As for chart, everything is placed here, in points on the page; svg.go
// only writes it out.
type stack struct {
	title  string
	pauses []span // the client's pauses, shaded in every panel
	height float64
	xLabel string
	panels []stackPanel
}

// stackPanel is one shape's panel.
type stackPanel struct {
	title       string
	titleSize   float64 // titleSize, or less for a title too wide for the panel
	panel       panel
	bars        []bar
	line        []point // requests per interval; nil for none
	ceiling     float64 // the line is cut off above it
	marks       []float64
	legend      box
	legendNames []string // admitted, denied, then the line's and the marks' if drawn
	lineName    string
	markName    string
}

// Stack geometry, in points: the page's top (below its title), each
// panel's title row, data area and the gap below it, and the room for the
// time axis's labels and name below the last.
const (
	stackTop    = 30.0
	stackTitle  = 18.0
	stackHeight = 120.0
	stackGap    = 12.0
	stackBottom = 40.0
)

// timeUnit is the unit of a stack's time axis.
type timeUnit struct {
	name    string
	seconds float64
}

// unitFor is the unit that labels a time axis of end seconds with numbers
// of a few digits.
func unitFor(end float64) timeUnit {
	switch {
	case end <= 300:
		return timeUnit{"s", 1}
	case end <= 300*60:
		return timeUnit{"min", 60}
	case end <= 120*3600:
		return timeUnit{"h", 3600}
	}
	return timeUnit{"days", 86400}
}

// newStack places the panels of res's shapes.
func newStack(cfg simConfig, res simResult) *stack {
	end := cfg.duration.Seconds()
	unit := unitFor(end)
	st := &stack{
		title:  "load " + cfg.loadText + costText(cfg.cost),
		pauses: pauseSpans(cfg),
		xLabel: "time since " + cfg.start.Format(time.RFC3339) + " (" + unit.name + ")",
	}
	if p := cfg.pauseText(); p != "" {
		st.title += ", " + p
	}
	var xTicks []tick
	if len(res.runs) > 0 && len(res.runs[0].intervals) <= maxIntervalTicks {
		xTicks = []tick{{0, "0"}}
		for _, r := range res.runs[0].intervals {
			xTicks = append(xTicks, tick{r.end.Seconds(), formatTick(r.end.Seconds()/unit.seconds, 3)})
		}
	} else {
		for _, t := range niceTicks(0, end/unit.seconds) {
			xTicks = append(xTicks, tick{t.value * unit.seconds, t.label})
		}
	}

	// One scale for every panel: the tallest bar, and the lines up to
	// rateRoom times it.
	var maxCount float64
	for _, run := range res.runs {
		for _, r := range run.intervals {
			maxCount = max(maxCount, float64(r.admitted), float64(r.denied))
		}
	}
	room := rateRoom * max(1, maxCount)
	perInterval := cfg.interval.Seconds() / cfg.cost
	lineName := "long-run rate"
	if cfg.cost != 1 {
		lineName += " / cost"
	}
	top := stackTop
	for _, run := range res.runs {
		p := stackPanel{title: run.title}
		p.panel.area = box{plotLeft, top + stackTitle, plotRight, top + stackTitle + stackHeight}
		top = p.panel.area.maxY + stackGap
		for _, r := range run.intervals {
			from, to := r.start.Seconds(), r.end.Seconds()
			gap := (to - from) * barGap
			mid := (from + to) / 2
			p.bars = append(p.bars,
				bar{from: from + gap, to: mid, count: float64(r.admitted)},
				bar{from: mid, to: to - gap, count: float64(r.denied), denied: true})
		}
		switch run.kind {
		case bucketShape:
			p.line, p.lineName = rateLine(cfg), lineName
			for _, ch := range cfg.changes {
				p.marks = append(p.marks, ch.at.Seconds())
			}
			if len(p.marks) > 0 {
				p.markName = "limit change"
			}
		case windowShape:
			w := cfg.window
			y := w.limit / w.span.Seconds() * perInterval
			p.line, p.lineName = []point{{0, y}, {end, y}}, lineName
		case quotaShape:
			p.marks, p.markName = periodStarts(cfg), "new period"
		}
		for _, q := range p.line {
			maxCount = max(maxCount, min(q.y, room))
		}
		p.legendNames = []string{"admitted", "denied"}
		for _, n := range []string{p.lineName, p.markName} {
			if n != "" {
				p.legendNames = append(p.legendNames, n)
			}
		}
		st.panels = append(st.panels, p)
	}
	st.height = top - stackGap + stackBottom

	// Each legend in its panel's top right corner: raise the Y axis
	// until the tallest bar, and the lines, end below the tallest legend.
	var legendHeight float64
	for _, p := range st.panels {
		legendHeight = max(legendHeight, float64(len(p.legendNames))*legendRow)
	}
	yMax := max(1, maxCount)
	if below := stackHeight - legendHeight - 2*legendMargin; below >= stackHeight/4 {
		yMax *= stackHeight / below
	}
	for i := range st.panels {
		p := &st.panels[i]
		p.ceiling = maxCount
		p.panel.xMax, p.panel.yMax = end, yMax
		p.panel.xTicks, p.panel.yTicks = xTicks, countTicks(yMax)
		p.panel.yLabel = "requests per " + shortDuration(cfg.interval)
		p.panel.yLabelSize = fitSize(p.panel.yLabel, axisSize, stackHeight)
		p.titleSize = fitSize(p.title, titleSize, plotRight-plotLeft)
		var names float64
		for _, n := range p.legendNames {
			names = max(names, textWidth(n, fontSize))
		}
		right := plotRight - legendSlack
		minY := p.panel.area.minY + legendMargin
		p.legend = box{minX: right - swatchWidth - swatchGap - names, minY: minY,
			maxX: right, maxY: minY + float64(len(p.legendNames))*legendRow}
	}
	return st
}

// countTicks are the ticks of an axis of requests from 0 to yMax: whole
// numbers, unless there would be fewer than two.
func countTicks(yMax float64) []tick {
	all := niceTicks(0, yMax)
	whole := slices.DeleteFunc(slices.Clone(all), func(t tick) bool { return t.value != math.Trunc(t.value) })
	if len(whole) < 2 {
		return all
	}
	return whole
}

// costText is the cost as the stack's title gives it: nothing for 1.
func costText(cost float64) string {
	if cost == 1 {
		return ""
	}
	return ", cost " + formatTick(cost, 3) + " a request"
}

// maxMarks is the most new periods a quota's panel marks: more would
// cover it in grey.
const maxMarks = 400

// periodStarts are the instants, in seconds into the run, after its start
// and before its end, at which the quota's periods begin; none if there
// are more than maxMarks.
func periodStarts(cfg simConfig) []float64 {
	var out []float64
	_, next := cfg.quota.cal.Bounds(cfg.start)
	for end := cfg.start.Add(cfg.duration); next.Before(end); _, next = cfg.quota.cal.Bounds(next) {
		if len(out) == maxMarks {
			return nil
		}
		out = append(out, next.Sub(cfg.start).Seconds())
	}
	return out
}
