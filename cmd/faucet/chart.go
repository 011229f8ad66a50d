package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// chart is a simulation drawn as two panels over one time axis, in
// seconds from 0 to the end of the simulation: the tokens left after each
// request (top), and the requests admitted and denied in each interval
// (bottom), as bars that span their interval, so that a moment lines up
// in both. The rate is a line over the bars, in requests per interval, and
// each --set-limit a dashed line across both panels where that line steps,
// labelled at the top of the tokens panel.
type chart struct {
	tokens, counts   *plot.Plot
	admitted, denied *plotter.Histogram
	rate             *rateLine
	maxCount         float64      // the tallest bar, or the rate line if taller (up to rateRoom times)
	countMarks       *changeMarks // the bottom panel's, which stop below its legend
	labels           *changeLabels
}

// Chart geometry: the page, the space between bars, and between the
// legend and the bars beneath it.
const (
	chartWidth, chartHeight = 8 * vg.Inch, 6 * vg.Inch
	barGap                  = 0.1 // of an interval, on each side of its pair of bars
	legendMargin            = vg.Length(4)
)

// drawChart writes an SVG of the simulation to path.
func drawChart(cfg simConfig, res simResult, path string) error {
	c, err := newChart(cfg, res)
	if err != nil {
		return err
	}
	canvas := vgsvg.New(chartWidth, chartHeight)
	c.draw(draw.New(canvas))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func newChart(cfg simConfig, res simResult) (*chart, error) {
	end := cfg.duration.Seconds()
	c := &chart{tokens: plot.New(), counts: plot.New()}

	rate := cfg.rateText
	if len(cfg.changes) > 0 {
		rate += " (changes marked)"
	}
	c.tokens.Title.Text = fmt.Sprintf("rate %s, burst %g, load %s", rate, cfg.burst, cfg.loadText)
	c.tokens.Y.Label.Text = "tokens after request"
	pts := make(plotter.XYs, len(res.samples))
	for i, s := range res.samples {
		pts[i] = plotter.XY{X: s.at.Seconds(), Y: s.tokens}
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	line.Color = admitColor
	c.labels = &changeLabels{style: c.tokens.X.Tick.Label}
	c.labels.style.XAlign, c.labels.style.YAlign = draw.XLeft, draw.YTop
	for _, ch := range cfg.changes {
		c.labels.xs = append(c.labels.xs, ch.at.Seconds())
		c.labels.text = append(c.labels.text, ch.label())
	}
	c.countMarks = &changeMarks{xs: c.labels.xs, style: markStyle}
	c.tokens.Add(plotter.NewGrid(), &changeMarks{xs: c.labels.xs, style: markStyle}, line, c.labels)
	c.tokens.Y.Min, c.tokens.Y.Max = 0, cfg.burst

	c.counts.X.Label.Text = "time (s)"
	c.counts.Y.Label.Text = fmt.Sprintf("requests per %v", cfg.interval)
	c.admitted = &plotter.Histogram{FillColor: admitColor}
	c.denied = &plotter.Histogram{FillColor: denyColor}
	for _, r := range res.intervals {
		from, to := r.start.Seconds(), r.end.Seconds()
		gap := (to - from) * barGap
		mid := (from + to) / 2
		c.admitted.Bins = append(c.admitted.Bins, plotter.HistogramBin{Min: from + gap, Max: mid, Weight: float64(r.admitted)})
		c.denied.Bins = append(c.denied.Bins, plotter.HistogramBin{Min: mid, Max: to - gap, Weight: float64(r.denied)})
		c.maxCount = max(c.maxCount, float64(r.admitted), float64(r.denied))
	}
	if c.rate, err = newRateLine(cfg); err != nil {
		return nil, err
	}
	// The rate line sets the scale only up to rateRoom times the tallest
	// bar: a limit far above the load would flatten the bars. Above that,
	// the line is cut off, below the legend; the labels still give the
	// rate.
	room := rateRoom * max(1, c.maxCount)
	for _, p := range c.rate.XYs {
		c.maxCount = max(c.maxCount, min(p.Y, room))
	}
	c.rate.ceiling = c.maxCount
	c.counts.Add(c.countMarks, c.admitted, c.denied, c.rate)
	c.counts.Legend.Add("admitted", c.admitted)
	c.counts.Legend.Add("denied", c.denied)
	rateName := "rate"
	if cfg.cost != 1 {
		rateName = "rate / cost"
	}
	c.counts.Legend.Add(rateName, c.rate)
	c.counts.Legend.Top = true
	// Swatch first, then the label, left-aligned: a viewer that lacks the
	// SVG's font substitutes another, often wider, and a right-aligned
	// label would then run into its swatch.
	c.counts.Legend.Left = true
	c.counts.Y.Min, c.counts.Y.Max = 0, max(1, c.maxCount)

	var xTicks plot.Ticker = plainTicks{}
	if len(res.intervals) <= maxIntervalTicks {
		xTicks = intervalTicks(res.intervals)
	}
	for _, p := range []*plot.Plot{c.tokens, c.counts} {
		p.X.Min, p.X.Max = 0, end
		p.X.Tick.Marker = xTicks
		p.Y.Tick.Marker = plainTicks{}
	}
	return c, nil
}

// rateRoom is how far above the tallest bar the bottom panel reaches to
// show the rate line.
const rateRoom = 2

// rateLine is the rate in force over time, in requests per interval: what
// the limit admits in an interval once the burst is spent. It steps at
// each change, and is cut off above ceiling.
type rateLine struct {
	*plotter.Line
	ceiling float64
}

// newRateLine is cfg's rate line, without a ceiling. The steps are points
// of their own, not a StepStyle: plotter.Line clips the line between the
// points before it steps, so a step out of the panel would be drawn as a
// slanted cut.
func newRateLine(cfg simConfig) (*rateLine, error) {
	perInterval := func(rate float64) float64 { return rate * cfg.interval.Seconds() / cfg.cost }
	pts := plotter.XYs{{X: 0, Y: perInterval(cfg.rate)}}
	for _, ch := range cfg.changes {
		at := ch.at.Seconds()
		pts = append(pts, plotter.XY{X: at, Y: pts[len(pts)-1].Y}, plotter.XY{X: at, Y: perInterval(ch.rate)})
	}
	pts = append(pts, plotter.XY{X: cfg.duration.Seconds(), Y: pts[len(pts)-1].Y})
	line, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	line.Color = rateColor
	line.Width = vg.Points(1.5)
	return &rateLine{Line: line, ceiling: math.Inf(1)}, nil
}

func (r *rateLine) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	pts := make([]vg.Point, len(r.XYs))
	for i, xy := range r.XYs {
		pts[i] = vg.Point{X: trX(xy.X), Y: trY(xy.Y)}
	}
	clip := c
	clip.Max.Y = min(c.Max.Y, trY(r.ceiling))
	c.StrokeLines(r.LineStyle, clip.ClipLinesXY(pts)...)
}

// maxIntervalTicks is the most intervals whose bounds are all labelled on
// the time axis; with more, the labels would run into each other.
const maxIntervalTicks = 12

// intervalTicks labels the time axis at the bounds of the intervals, in
// seconds, so that each pair of bars sits between two labels.
func intervalTicks(intervals []simInterval) plot.ConstantTicks {
	ticks := plot.ConstantTicks{{Value: 0, Label: "0"}}
	for _, r := range intervals {
		ticks = append(ticks, plot.Tick{Value: r.end.Seconds(), Label: strconv.FormatFloat(r.end.Seconds(), 'g', -1, 64)})
	}
	return ticks
}

// layout places both panels on dc with their time axes aligned, leaving
// room above the tallest bar for the legend, and returns their cells.
func (c *chart) layout(dc draw.Canvas) [2]draw.Canvas {
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(6), PadY: vg.Points(12), PadRight: vg.Points(12)}
	align := func() [2]draw.Canvas {
		cells := plot.Align([][]*plot.Plot{{c.tokens}, {c.counts}}, tiles, dc)
		return [2]draw.Canvas{cells[0][0], cells[1][0]}
	}
	cells := align()
	// The legend is drawn in the top right corner of the panel: raise the
	// Y axis until the tallest bar ends below it. The new range may change
	// the tick labels and so the panel's size: align again and check.
	for range 3 {
		data := c.counts.DataCanvas(cells[1])
		room := c.legendBottom(cells[1]) - legendMargin - data.Min.Y
		h := data.Max.Y - data.Min.Y
		need := max(1, c.maxCount) * float64(h/room)
		if room < h/4 || need <= c.counts.Y.Max {
			break
		}
		c.counts.Y.Max = need
		cells = align()
	}
	// Move it from the left end of the time axis, where plot.Draw starts
	// it, to end legendSlack short of the right end: room for a wider
	// substitute font.
	l := &c.counts.Legend
	data := c.counts.DataCanvas(cells[1])
	left := data.Max.X - legendSlack - l.Rectangle(cells[1]).Size().X
	l.XOffs = left - data.Min.X
	// The marks of changes stop short of the legend, wherever they cross it.
	c.countMarks.legend = vg.Rectangle{
		Min: vg.Point{X: left - legendMargin, Y: c.legendBottom(cells[1]) - legendMargin},
		Max: vg.Point{X: data.Max.X, Y: cells[1].Max.Y},
	}
	return cells
}

// legendSlack is the room left right of the legend's labels.
const legendSlack = vg.Length(12)

// legendBottom is the lowest point of the bottom panel's legend, drawn in
// cell.
func (c *chart) legendBottom(cell draw.Canvas) vg.Length {
	l := c.counts.Legend
	r := l.Rectangle(cell)
	return cell.Max.Y - r.Size().Y - l.TextStyle.FontExtents().Descent
}

func (c *chart) draw(dc draw.Canvas) {
	cells := c.layout(dc)
	c.tokens.Draw(cells[0])
	c.counts.Draw(cells[1])
}

// plainTicks are plot.DefaultTicks labelled without trailing zeros: 50,
// not 50.00.
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i, t := range ticks {
		if strings.Contains(t.Label, ".") && !strings.ContainsAny(t.Label, "eE") {
			ticks[i].Label = strings.TrimSuffix(strings.TrimRight(t.Label, "0"), ".")
		}
	}
	return ticks
}

// changeMarks draws a dashed vertical line at each change of the limit,
// up to the top of the panel or, where it would cross it, to just below
// legend (page coordinates; the zero rectangle for none).
type changeMarks struct {
	xs     []float64 // seconds
	style  draw.LineStyle
	legend vg.Rectangle
}

func (m *changeMarks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, x := range m.xs {
		px, top := trX(x), c.Max.Y
		if m.legend != (vg.Rectangle{}) && px >= m.legend.Min.X && px <= m.legend.Max.X && m.legend.Min.Y < top {
			top = max(c.Min.Y, m.legend.Min.Y)
		}
		c.StrokeLine2(m.style, px, c.Min.Y, px, top)
	}
}

// changeLabels writes each change's label at the top of the panel, on a
// white ground, right of its mark, or left of it where the panel ends
// first; a label that would run into one already placed moves down a row,
// as far as the panel goes.
type changeLabels struct {
	xs    []float64 // seconds
	text  []string
	style draw.TextStyle
}

// Label geometry: the space between a mark and its label, the label's
// margin within its ground, and the room for a substitute font that is
// wider than the one measured.
const (
	labelGap    = vg.Length(3)
	labelPad    = vg.Length(2)
	labelSlack  = 0.15 // of the label's width
	labelGround = 0xee // alpha of the white ground
)

func (l *changeLabels) Plot(c draw.Canvas, p *plot.Plot) {
	for i, box := range l.boxes(c, p) {
		c.FillPolygon(color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: labelGround}, []vg.Point{
			box.Min, {X: box.Max.X, Y: box.Min.Y}, box.Max, {X: box.Min.X, Y: box.Max.Y},
		})
		c.FillText(l.style, vg.Point{X: box.Min.X + labelPad, Y: box.Max.Y - labelPad}, l.text[i])
	}
}

// boxes are the labels' grounds on c, the panel's data canvas.
func (l *changeLabels) boxes(c draw.Canvas, p *plot.Plot) []vg.Rectangle {
	trX, _ := p.Transforms(&c)
	h := l.style.Height("Mg") + 2*labelPad
	var out []vg.Rectangle
	for i, x := range l.xs {
		w := l.style.Width(l.text[i])*(1+labelSlack) + 2*labelPad
		left := trX(x) + labelGap
		if left+w > c.Max.X {
			left = max(c.Min.X, trX(x)-labelGap-w)
		}
		box := vg.Rectangle{Min: vg.Point{X: left, Y: c.Max.Y - h}, Max: vg.Point{X: left + w, Y: c.Max.Y}}
		for slices.ContainsFunc(out, func(o vg.Rectangle) bool { return overlap(o, box) }) && box.Min.Y-h >= c.Min.Y {
			box.Min.Y -= h
			box.Max.Y -= h
		}
		out = append(out, box)
	}
	return out
}

// overlap reports whether a and b share more than an edge.
func overlap(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

var (
	admitColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	denyColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	rateColor  = color.RGBA{A: 0xff}
	markStyle  = draw.LineStyle{Color: color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
)
