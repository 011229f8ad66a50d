package sim

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
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
			cfg.svg = "chart.svg" // samples are kept only for a chart
			res, err := simulate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := newChart(cfg, res.runs[0])
			end := cfg.duration.Seconds()
			for _, p := range []panel{c.tokens, c.counts} {
				if p.xMax != end {
					t.Errorf("time axis from 0 to %g, want 0 to %g", p.xMax, end)
				}
			}
			top, bottom := c.tokens.area, c.counts.area
			if math.Abs(top.minX-bottom.minX) > 0.01 || math.Abs(top.maxX-bottom.maxX) > 0.01 {
				t.Errorf("the panels' time axes span %v to %v and %v to %v on the page, want the same", top.minX, top.maxX, bottom.minX, bottom.maxX)
			}
			if top.maxY >= bottom.minY {
				t.Errorf("the top panel ends at %v, below the bottom one's start at %v", top.maxY, bottom.minY)
			}
			for i, b := range c.bars {
				if b.from < 0 || b.to > end || b.from >= b.to {
					t.Errorf("bar %d spans %g to %g s, outside the time axis 0 to %g", i, b.from, b.to, end)
				}
				if c.counts.x(b.to) > c.legend.minX && c.counts.y(b.count) < c.legend.maxY {
					t.Errorf("bar %d (%g requests) reaches %v, into the legend, which starts at %v", i, b.count, c.counts.y(b.count), c.legend.maxY)
				}
			}
			if c.legend.minX < bottom.minX || c.legend.maxX > bottom.maxX || c.legend.minY < bottom.minY {
				t.Errorf("legend %v outside the panel %v", c.legend, bottom)
			}
			checkRateLine(t, c, cfg)
			checkLabels(t, c.labelBoxes, len(cfg.changes), top)
			useless := regexp.MustCompile(`\.\d*0$|\.$`)
			for name, ticks := range map[string][]tick{"tokens X": c.tokens.xTicks, "tokens Y": c.tokens.yTicks, "counts X": c.counts.xTicks, "counts Y": c.counts.yTicks} {
				labels := 0
				for _, tick := range ticks {
					if tick.label != "" {
						labels++
					}
					if useless.MatchString(tick.label) {
						t.Errorf("%s tick label %q", name, tick.label)
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
func checkRateLine(t *testing.T, c *chart, cfg simConfig) {
	t.Helper()
	perInterval := cfg.interval.Seconds() / cfg.cost
	want := []point{{0, cfg.rate * perInterval}}
	for _, ch := range cfg.changes {
		at := ch.at.Seconds()
		want = append(want, point{at, want[len(want)-1].y}, point{at, ch.rate * perInterval})
	}
	want = append(want, point{cfg.duration.Seconds(), want[len(want)-1].y})
	if !slices.Equal(c.rate, want) {
		t.Errorf("rate line %v, want %v", c.rate, want)
	}
	// The line runs straight between its points, cut off at its ceiling.
	for i := 1; i < len(c.rate); i++ {
		a, b := c.rate[i-1], c.rate[i]
		if y := min(max(a.y, b.y), c.ceiling); c.counts.x(max(a.x, b.x)) > c.legend.minX && c.counts.y(y) < c.legend.maxY {
			t.Errorf("rate line from %v to %v reaches %v, into the legend, which starts at %v", a, b, c.counts.y(y), c.legend.maxY)
		}
	}
}

// checkLabels checks that there is a label for each of n changes, all
// inside the panel's data area, none over another.
func checkLabels(t *testing.T, boxes []box, n int, data box) {
	t.Helper()
	if len(boxes) != n {
		t.Errorf("%d labels for %d changes", len(boxes), n)
	}
	for i, b := range boxes {
		if b.minX < data.minX || b.maxX > data.maxX || b.minY < data.minY || b.maxY > data.maxY {
			t.Errorf("label %d spans %v, outside the panel %v", i, b, data)
		}
		for j, o := range boxes[:i] {
			if overlap(o, b) {
				t.Errorf("label %d at %v runs into label %d at %v", i, b, j, o)
			}
		}
	}
}

// A line of more requests than the page has columns keeps, in each
// column, its first and last points and its extremes, in order.
func TestThin(t *testing.T) {
	var pts []point
	for i := range 100_000 {
		pts = append(pts, point{float64(i) / 1000, float64(i % 7)})
	}
	p := panel{area: box{0, 0, 100, 100}, xMax: 100, yMax: 10}
	got := thin(pts, p.x)
	if len(got) > 4*4*100 || len(got) < 2*4*100 {
		t.Errorf("%d points kept of %d on a 100-point-wide panel, want 2 to 4 for each of its 400 columns", len(got), len(pts))
	}
	if got[0] != pts[0] || got[len(got)-1] != pts[len(pts)-1] {
		t.Errorf("thin line runs from %v to %v, want %v to %v", got[0], got[len(got)-1], pts[0], pts[len(pts)-1])
	}
	if !slices.IsSortedFunc(got, func(a, b point) int { return cmp.Compare(a.x, b.x) }) {
		t.Errorf("thin line is out of order")
	}
	for col := 0; col < 400; col++ {
		var lo, hi float64 = math.Inf(1), math.Inf(-1)
		for _, q := range got {
			if math.Floor(p.x(q.x)*4) == float64(col) {
				lo, hi = min(lo, q.y), max(hi, q.y)
			}
		}
		if lo != 0 || hi != 6 {
			t.Fatalf("column %d keeps values %g to %g, want 0 to 6", col, lo, hi)
		}
	}
	few := []point{{0, 1}, {50, 2}, {100, 3}}
	if got := thin(few, p.x); !slices.Equal(got, few) {
		t.Errorf("thin(%v) = %v, want every point of a line sparser than the columns", few, got)
	}
}

// labels are the labels of ticks.
func labels(ticks []tick) string {
	var out []string
	for _, t := range ticks {
		out = append(out, t.label)
	}
	return strings.Join(out, " ")
}

func Example_niceTicks() {
	fmt.Println(labels(niceTicks(0, 50)))
	fmt.Println(labels(niceTicks(0, 1.2)))
	fmt.Println(labels(niceTicks(0, 0.3)))
	fmt.Println(labels(niceTicks(0, 76.4)))
	fmt.Println(labels(niceTicks(0, 2e6)))
	// Output:
	// 0 10 20 30 40 50
	// 0 0.25 0.5 0.75 1
	// 0 0.1 0.2 0.3
	// 0 20 40 60
	// 0 500000 1000000 1500000 2000000
}
