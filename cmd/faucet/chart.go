package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// drawChart writes an SVG of the simulation: the tokens left after each
// request (top) and the requests admitted and denied per interval (bottom).
func drawChart(cfg simConfig, res simResult, path string) error {
	tokens := plot.New()
	tokens.Title.Text = fmt.Sprintf("rate %g/s, burst %g, load %s", cfg.rate, cfg.burst, cfg.loadText)
	tokens.X.Label.Text = "time (s)"
	tokens.Y.Label.Text = "tokens after request"
	tokens.Y.Min = 0
	tokens.Y.Max = cfg.burst
	pts := make(plotter.XYs, len(res.samples))
	for i, s := range res.samples {
		pts[i] = plotter.XY{X: s.at.Seconds(), Y: s.tokens}
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	line.Color = admitColor
	tokens.Add(line, plotter.NewGrid())

	counts := plot.New()
	counts.X.Label.Text = fmt.Sprintf("interval (%v each)", cfg.interval)
	counts.Y.Label.Text = "requests"
	admitted := make(plotter.Values, len(res.intervals))
	denied := make(plotter.Values, len(res.intervals))
	names := make([]string, len(res.intervals))
	for i, r := range res.intervals {
		admitted[i], denied[i] = float64(r.admitted), float64(r.denied)
		names[i] = r.start.String()
	}
	width := vg.Points(max(2, 300/float64(len(res.intervals)+1)))
	ok, err := plotter.NewBarChart(admitted, width)
	if err != nil {
		return err
	}
	ok.Color = admitColor
	ok.Offset = -width / 2
	no, err := plotter.NewBarChart(denied, width)
	if err != nil {
		return err
	}
	no.Offset = width / 2
	no.Color = denyColor
	counts.Add(ok, no)
	counts.Legend.Add("admitted", ok)
	counts.Legend.Add("denied", no)
	counts.Legend.Top = true
	counts.Legend.Left = true
	counts.Legend.XOffs = vg.Points(40)
	if len(names) <= 20 {
		counts.NominalX(names...)
	}

	const w, h = 8 * vg.Inch, 6 * vg.Inch
	canvas := vgsvg.New(w, h)
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(6), PadY: vg.Points(12)}
	cells := plot.Align([][]*plot.Plot{{tokens}, {counts}}, tiles, dc)
	tokens.Draw(cells[0][0])
	counts.Draw(cells[1][0])
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

var (
	admitColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	denyColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)
