package sim

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The adaptive chart draws what the run did: in the top panel the rate
// line steps where the controller changed it and the capacity line where
// the upstream's changed; in the bottom one a level of p99 for each
// interval and the target; legends above the data; one time axis.
func TestAdaptiveChartLayout(t *testing.T) {
	cfg, res := convergenceRun(t)
	c := newAdaptiveChart(cfg, res)
	if c.counts.xMax != 90 || c.latency.xMax != 90 || c.counts.area.minX != c.latency.area.minX || c.counts.area.maxX != c.latency.area.maxX {
		t.Errorf("time axes %v over %v and %v over %v, want both 0 to 90 s over the same span of the page", c.counts.xMax, c.counts.area, c.latency.xMax, c.latency.area)
	}
	if c.counts.area.maxY >= c.latency.area.minY {
		t.Errorf("the top panel ends at %v, below the bottom one's start at %v", c.counts.area.maxY, c.latency.area.minY)
	}
	if want := stepLine(res.adaptive.rates, 90); !slices.Equal(c.rate, want) || len(res.adaptive.rates) < 10 {
		t.Errorf("rate line %v, want the %d changes of the run %v", c.rate, len(res.adaptive.rates), want)
	}
	if want := []point{{0, 1000}, {20, 1000}, {20, 200}, {50, 200}, {50, 1000}, {90, 1000}}; !slices.Equal(c.capacity, want) {
		t.Errorf("capacity line %v, want %v", c.capacity, want)
	}
	if len(c.p99) != 2*len(res.runs[0].intervals) {
		t.Errorf("%d points of p99 for %d intervals, want a level for each", len(c.p99), len(res.runs[0].intervals))
	}
	if got := c.latencyMillis(c.target); math.Abs(got-50) > 1e-9 {
		t.Errorf("target line at %g ms, want 50", got)
	}
	// The p99 of the first interval after the drop: 812 ms.
	if got := c.latencyMillis(c.p99[2*20].y); math.Abs(got-float64(res.runs[0].intervals[20].up.p99)/1e6) > 1e-6 {
		t.Errorf("p99 line at %g ms from 20 s, want %v", got, res.runs[0].intervals[20].up.p99)
	}
	below := func(name string, p panel, legend box, pts []point) {
		for _, q := range pts {
			if p.x(q.x) > legend.minX && p.y(q.y) < legend.maxY {
				t.Errorf("%s at %v reaches %v on the page, into the legend, which ends at %v", name, q, p.y(q.y), legend.maxY)
			}
			if p.y(q.y) < p.area.minY || p.y(q.y) > p.area.maxY {
				t.Errorf("%s at %v lies outside its panel", name, q)
			}
		}
	}
	var tops []point
	for _, b := range c.bars {
		tops = append(tops, point{b.from, b.count}, point{b.to, b.count})
	}
	below("bar", c.counts, c.countsLegend, tops)
	below("rate", c.counts, c.countsLegend, c.rate)
	below("capacity", c.counts, c.countsLegend, c.capacity)
	below("p99", c.latency, c.latencyLegend, c.p99)
	if labels(c.latency.yTicks) != "0.1 1 10 100 1000" {
		t.Errorf("latency ticks %q, want powers of ten from 0.1 to 1000 ms", labels(c.latency.yTicks))
	}
}

// faucet sim --upstream-capacity --svg writes the adaptive chart: its
// lines, dashed where they should be, legends, and axes labelled.
func TestAdaptiveChartSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "adaptive.svg")
	code, out, errs := runArgs(append(slices.Clone(convergenceArgs), "--svg", path)...)
	if code != 0 || !strings.Contains(out, "chart written to "+path) {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	svg := readSVG(t, path)
	for _, want := range []string{"admitted", "timed out", "adaptive rate", "upstream capacity", "p99 latency", "target 50ms",
		"requests per second", "p99 (ms, log scale)", "time (s)", "1000", "0.1", "80",
		"adaptive rate 50 to 1000/s, p99 target 50ms, load 1500/s, burst 10"} {
		if !slices.Contains(svg.texts, want) {
			t.Errorf("chart has no text %q: %q", want, svg.texts)
		}
	}
	// Dashed: the capacity line and the target line, and their legends'
	// samples.
	if svg.dashed != 4 {
		t.Errorf("chart has %d dashed paths, want 4", svg.dashed)
	}
}
