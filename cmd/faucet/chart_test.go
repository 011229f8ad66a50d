package main

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// What can be checked of the chart without looking at it: both panels
// share one time axis, placed alike on the page; every bar lies inside it;
// the legend is above the bars and the rate line beneath it; the rate line
// steps at each --set-limit, whose labels lie inside the top panel, apart;
// tick labels carry no useless zeros (50, not 50.00).
func TestChartLayout(t *testing.T) {
	for _, cfg := range []simConfig{
		{rate: 10, burst: 50, load: 60, loadText: "60/s", cost: 1, duration: 5 * time.Second, interval: time.Second},
		{rate: 2, burst: 5, load: 3, loadText: "3/s", cost: 1, duration: 5 * time.Second, interval: 2 * time.Second},
		{rate: 100, burst: 1000, load: 150, loadText: "150/s", cost: 1, duration: time.Minute, interval: time.Second},
		{rate: 0.5, burst: 2.5, load: 1, loadText: "1/s", cost: 0.25, duration: 3 * time.Second, interval: 250 * time.Millisecond},
		{rate: 10, burst: 10, load: 10, loadText: "10/s", cost: 1, duration: 5 * time.Second, interval: time.Second}, // bars all alike
		{rate: 10, burst: 50, load: 60, loadText: "60/s", cost: 1, duration: time.Minute, interval: time.Second,
			changes: changesOf(t, time.Minute, "20s=30/s", "40s=5/s")},
		// Changes crowded at the end, where labels go left of their marks.
		{rate: 10, burst: 20, load: 60, loadText: "60/s", cost: 1, duration: 10 * time.Second, interval: time.Second,
			changes: changesOf(t, 10*time.Second, "8.5s=50/s", "9s=1/s", "9.2s=2/s")},
		// At both ends, and a rate far above the load, under the legend.
		{rate: 10, burst: 50, load: 60, loadText: "60/s", cost: 2, duration: time.Minute, interval: 5 * time.Second,
			changes: changesOf(t, time.Minute, "0s=20/s", "56s=1000/s", "60s=1/s")},
	} {
		t.Run(fmt.Sprintf("rate=%g,load=%s,interval=%v,changes=%d", cfg.rate, cfg.loadText, cfg.interval, len(cfg.changes)), func(t *testing.T) {
			res, err := simulate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c, err := newChart(cfg, res)
			if err != nil {
				t.Fatal(err)
			}
			cells := c.layout(draw.New(vgsvg.New(chartWidth, chartHeight)))
			end := cfg.duration.Seconds()
			for _, p := range []*plot.Plot{c.tokens, c.counts} {
				if p.X.Min != 0 || p.X.Max != end {
					t.Errorf("time axis from %g to %g, want 0 to %g", p.X.Min, p.X.Max, end)
				}
			}
			top, bottom := c.tokens.DataCanvas(cells[0]), c.counts.DataCanvas(cells[1])
			if math.Abs(float64(top.Min.X-bottom.Min.X)) > 0.01 || math.Abs(float64(top.Max.X-bottom.Max.X)) > 0.01 {
				t.Errorf("the panels' time axes span %v to %v and %v to %v on the page, want the same", top.Min.X, top.Max.X, bottom.Min.X, bottom.Max.X)
			}
			trX, trY := c.counts.Transforms(&bottom)
			legend := c.counts.Legend.Rectangle(cells[1])
			legendLeft := bottom.Max.X - legendSlack - legend.Size().X
			legendBottom := c.legendBottom(cells[1])
			for _, h := range []*plotter.Histogram{c.admitted, c.denied} {
				for i, b := range h.Bins {
					if b.Min < 0 || b.Max > end || b.Min >= b.Max {
						t.Errorf("bar %d spans %g to %g s, outside the time axis 0 to %g", i, b.Min, b.Max, end)
					}
					if trX(b.Max) > legendLeft && trY(b.Weight) > legendBottom {
						t.Errorf("bar %d (%g requests) reaches %v, into the legend, which starts at %v", i, b.Weight, trY(b.Weight), legendBottom)
					}
				}
			}
			checkRateLine(t, c, cfg, trX, trY, legendLeft, legendBottom)
			checkLabels(t, c.labels.boxes(top, c.tokens), len(cfg.changes), top)
			useless := regexp.MustCompile(`\.\d*0$|\.$`)
			for name, a := range map[string]*plot.Axis{"tokens X": &c.tokens.X, "tokens Y": &c.tokens.Y, "counts X": &c.counts.X, "counts Y": &c.counts.Y} {
				labels := 0
				for _, tick := range a.Tick.Marker.Ticks(a.Min, a.Max) {
					if tick.Label != "" {
						labels++
					}
					if useless.MatchString(tick.Label) {
						t.Errorf("%s tick label %q", name, tick.Label)
					}
				}
				if labels < 2 {
					t.Errorf("%s has %d labelled ticks, want at least 2", name, labels)
				}
			}
		})
	}
}

// changesOf are the --set-limit values args, for a simulation of d.
func changesOf(t *testing.T, d time.Duration, args ...string) []limitChange {
	changes, err := parseChanges(args, d, 50)
	if err != nil {
		t.Fatal(err)
	}
	return changes
}

// checkRateLine checks that the rate line starts at --rate and steps at
// each change, in requests per interval, and never runs into the legend.
func checkRateLine(t *testing.T, c *chart, cfg simConfig, trX, trY func(float64) vg.Length, legendLeft, legendBottom vg.Length) {
	t.Helper()
	perInterval := cfg.interval.Seconds() / cfg.cost
	want := plotter.XYs{{X: 0, Y: cfg.rate * perInterval}}
	for _, ch := range cfg.changes {
		at := ch.at.Seconds()
		want = append(want, plotter.XY{X: at, Y: want[len(want)-1].Y}, plotter.XY{X: at, Y: ch.rate * perInterval})
	}
	want = append(want, plotter.XY{X: cfg.duration.Seconds(), Y: want[len(want)-1].Y})
	if !slices.Equal(c.rate.XYs, want) {
		t.Errorf("rate line %v, want %v", c.rate.XYs, want)
	}
	// The line runs straight between its points, cut off at its ceiling.
	for i := 1; i < len(c.rate.XYs); i++ {
		a, b := c.rate.XYs[i-1], c.rate.XYs[i]
		if y := min(max(a.Y, b.Y), c.rate.ceiling); trX(max(a.X, b.X)) > legendLeft && trY(y) > legendBottom {
			t.Errorf("rate line from %v to %v reaches %v, into the legend, which starts at %v", a, b, trY(y), legendBottom)
		}
	}
}

// checkLabels checks that there is a label for each of n changes, all
// inside the panel's data canvas, none over another.
func checkLabels(t *testing.T, boxes []vg.Rectangle, n int, data draw.Canvas) {
	t.Helper()
	if len(boxes) != n {
		t.Errorf("%d labels for %d changes", len(boxes), n)
	}
	for i, b := range boxes {
		if b.Min.X < data.Min.X || b.Max.X > data.Max.X || b.Min.Y < data.Min.Y || b.Max.Y > data.Max.Y {
			t.Errorf("label %d spans %v, outside the panel %v", i, b, data.Rectangle)
		}
		for j, o := range boxes[:i] {
			if overlap(o, b) {
				t.Errorf("label %d at %v runs into label %d at %v", i, b, j, o)
			}
		}
	}
}

// labels are the labels of a ticker's labelled ticks from min to max.
func labels(tk plot.Ticker, min, max float64) string {
	var out []string
	for _, tick := range tk.Ticks(min, max) {
		if tick.Label != "" {
			out = append(out, tick.Label)
		}
	}
	return strings.Join(out, " ")
}

func Example_plainTicks() {
	fmt.Println(labels(plot.DefaultTicks{}, 0, 50))
	fmt.Println(labels(plainTicks{}, 0, 50))
	fmt.Println(labels(plainTicks{}, 0, 1.2))
	// Output:
	// 0.00 25.00 50.00
	// 0 25 50
	// 0 0.5 1
}
