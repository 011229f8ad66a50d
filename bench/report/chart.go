package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff},
}

// drawScaling plots median ns/op (left) and B/key (right) against the number
// of keys, one line per implementation, log-scaled axes.
func drawScaling(r *results, path string) error {
	left, right := plot.New(), plot.New()
	left.Title.Text = "time per call (scen=many, mode=allow)"
	left.Y.Label.Text = "ns/op"
	right.Title.Text = "heap per live key, key bytes included"
	right.Y.Label.Text = "bytes/key"
	for _, p := range []*plot.Plot{left, right} {
		p.X.Label.Text = "live keys"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		// Bottom right: both plots' lines stay clear of it (times rise
		// with the keys; bytes per key sit well above 0), and at the top
		// the legend ran into the title.
		p.Legend.Top = false
		p.Legend.Left = false
		p.Legend.XOffs = -vg.Points(24)
		p.Legend.YOffs = vg.Points(10)
	}
	left.Y.Scale = plot.LogScale{}
	left.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	right.Y.Min = 0
	for i, im := range r.impls("bench", "Scaling") {
		var ts, bs plotter.XYs
		for _, s := range r.find("bench", "Scaling", "impl", im) {
			var keys float64
			if _, err := fmt.Sscanf(s.config["keys"], "%g", &keys); err != nil {
				return fmt.Errorf("keys=%q: %v", s.config["keys"], err)
			}
			ts = append(ts, plotter.XY{X: keys, Y: median(s.values["sec/op"]) * 1e9})
			bs = append(bs, plotter.XY{X: keys, Y: median(s.values["B/key"])})
		}
		sort.Slice(ts, func(a, b int) bool { return ts[a].X < ts[b].X })
		sort.Slice(bs, func(a, b int) bool { return bs[a].X < bs[b].X })
		c := palette[i%len(palette)]
		for _, pair := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{left, ts}, {right, bs}} {
			l, pts, err := plotter.NewLinePoints(pair.xys)
			if err != nil {
				return err
			}
			l.Color, pts.Color = c, c
			pair.p.Add(l, pts)
			pair.p.Legend.Add(im, l, pts)
		}
		right.Y.Max = math.Max(right.Y.Max, maxY(bs)*1.15)
	}
	const w, h = 10 * vg.Inch, 4 * vg.Inch
	canvas := vgsvg.New(w, h)
	cells := plot.Align([][]*plot.Plot{{left, right}}, draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}, draw.New(canvas))
	left.Draw(cells[0][0])
	right.Draw(cells[0][1])
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

func maxY(xys plotter.XYs) float64 {
	m := 0.0
	for _, p := range xys {
		m = math.Max(m, p.Y)
	}
	return m
}
