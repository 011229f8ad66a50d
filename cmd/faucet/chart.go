package main

import (
	"fmt"
	"image/color"
	"os"
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
// in both.
type chart struct {
	tokens, counts   *plot.Plot
	admitted, denied *plotter.Histogram
	maxCount         float64 // the tallest bar
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

	c.tokens.Title.Text = fmt.Sprintf("rate %g/s, burst %g, load %s", cfg.rate, cfg.burst, cfg.loadText)
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
	c.tokens.Add(plotter.NewGrid(), line)
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
	c.counts.Add(c.admitted, c.denied)
	c.counts.Legend.Add("admitted", c.admitted)
	c.counts.Legend.Add("denied", c.denied)
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
	l.XOffs = data.Max.X - legendSlack - l.Rectangle(cells[1]).Size().X - data.Min.X
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

var (
	admitColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	denyColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)
