package sim

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// What can be checked of a stack without looking at it: one panel per
// shape, in order, each below the last with room for its title, all on one
// time axis and one scale; bars inside the axis and beneath the legend,
// lines too; titles and axis names that fit; marks inside the run.
func TestStackLayout(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	day := &quotaConfig{n: 100, cal: engine.Calendar{Period: engine.Daily}}
	window := &windowConfig{limit: 100, span: 24 * time.Hour}
	for _, cfg := range []simConfig{
		{bucket: true, rate: 100.0 / 86400, rateText: "100/24h", burst: 100, quota: day, window: window,
			load: 10.0 / 3600, loadText: "10/h", cost: 1, duration: 72 * time.Hour, interval: 6 * time.Hour},
		{bucket: true, rate: 10, rateText: "10/s", burst: 50, changes: changesOf(t, time.Minute, "20s=30/s"),
			window: &windowConfig{limit: 300, span: 30 * time.Second}, quota: &quotaConfig{n: 400, cal: engine.Calendar{Period: engine.Daily}},
			load: 60, loadText: "60/s", cost: 1, duration: time.Minute, interval: time.Second,
			start: time.Date(2026, 1, 1, 23, 59, 30, 0, time.UTC)},
		// One shape, a long title, a long interval's name, a cost.
		{quota: &quotaConfig{n: 1e6, zone: "America/Argentina/ComodRivadavia",
			cal: engine.Calendar{Period: engine.Yearly, Month: 1, Day: 31, Hour: 9, Location: tokyo}},
			load: 2, loadText: "2/s", cost: 0.5, duration: 10 * time.Hour, interval: 90*time.Minute + 500*time.Millisecond},
		// A window far above the load, its line cut off.
		{window: &windowConfig{limit: 4e6, span: time.Second, slots: 2},
			load: 3, loadText: "3/s", cost: 1, duration: 20 * time.Second, interval: 2 * time.Second},
	} {
		if cfg.start.IsZero() {
			cfg.start = start
		}
		t.Run(fmt.Sprintf("load=%s,duration=%v,bucket=%t,quota=%t,window=%t", cfg.loadText, cfg.duration, cfg.bucket, cfg.quota != nil, cfg.window != nil), func(t *testing.T) {
			res, err := simulate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			st := newStack(cfg, res)
			if len(st.panels) != len(res.runs) {
				t.Fatalf("%d panels for %d shapes", len(st.panels), len(res.runs))
			}
			end := cfg.duration.Seconds()
			for i, sp := range st.panels {
				p := sp.panel
				if sp.title != res.runs[i].title {
					t.Errorf("panel %d titled %q, want %q", i, sp.title, res.runs[i].title)
				}
				if w := textWidth(sp.title, sp.titleSize); w > plotRight-plotLeft+0.01 {
					t.Errorf("panel %d's title is %v wide, wider than the panel", i, w)
				}
				if h := textWidth(p.yLabel, p.yLabelSize); h > p.area.maxY-p.area.minY+0.01 {
					t.Errorf("panel %d's Y axis name %q is %v long, longer than the panel", i, p.yLabel, h)
				}
				if p.area.minX != plotLeft || p.area.maxX != plotRight || p.xMax != end {
					t.Errorf("panel %d's time axis spans %v to %v on the page and 0 to %v s, want %v to %v and 0 to %v",
						i, p.area.minX, p.area.maxX, p.xMax, plotLeft, plotRight, end)
				}
				if p.yMax != st.panels[0].panel.yMax {
					t.Errorf("panel %d's scale reaches %v, panel 0's %v: want one scale", i, p.yMax, st.panels[0].panel.yMax)
				}
				if i > 0 {
					// The title sits 6 points above the area; its
					// letters reach titleSize above that, and the panel
					// above ends in ticks 4 points long.
					if prev := st.panels[i-1].panel.area.maxY + 4; p.area.minY-6-sp.titleSize < prev {
						t.Errorf("panel %d's title reaches %v, into the panel above, which ends at %v", i, p.area.minY-6-sp.titleSize, prev)
					}
				}
				l := sp.legend
				if l.minX < p.area.minX || l.maxX > p.area.maxX || l.minY < p.area.minY || l.maxY > p.area.maxY {
					t.Errorf("panel %d's legend %v lies outside its area %v", i, l, p.area)
				}
				for j, b := range sp.bars {
					if b.from < 0 || b.to > end || b.from >= b.to {
						t.Errorf("panel %d: bar %d spans %g to %g s, outside the time axis 0 to %g", i, j, b.from, b.to, end)
					}
					if p.x(b.to) > l.minX && p.y(b.count) < l.maxY {
						t.Errorf("panel %d: bar %d (%g requests) reaches %v, into the legend, which ends at %v", i, j, b.count, p.y(b.count), l.maxY)
					}
				}
				for j := 1; j < len(sp.line); j++ {
					a, b := sp.line[j-1], sp.line[j]
					if y := min(max(a.y, b.y), sp.ceiling); p.x(max(a.x, b.x)) > l.minX && p.y(y) < l.maxY {
						t.Errorf("panel %d: line from %v to %v reaches %v, into the legend, which ends at %v", i, a, b, p.y(y), l.maxY)
					}
				}
				for _, x := range sp.marks {
					if x <= 0 || x > end {
						t.Errorf("panel %d: mark at %g s, outside the run", i, x)
					}
				}
				for _, tk := range p.yTicks {
					if tk.value != math.Trunc(tk.value) && p.yMax >= 2 {
						t.Errorf("panel %d: a tick at %v requests", i, tk.value)
					}
				}
			}
			last := st.panels[len(st.panels)-1].panel.area.maxY
			if st.height < last+4+fontSize+axisSize+8 {
				t.Errorf("page ends at %v, too soon for the time axis's labels and name below %v", st.height, last)
			}
		})
	}
}

// A quota's panel marks the start of each period within the run: in
// Tokyo's calendar, midnight is 15:00 UTC.
func TestPeriodStarts(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	cfg := simConfig{start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), duration: 72 * time.Hour,
		quota: &quotaConfig{n: 1, cal: engine.Calendar{Period: engine.Daily, Location: tokyo}}}
	got := periodStarts(cfg)
	want := []float64{15 * 3600, 39 * 3600, 63 * 3600}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("periodStarts = %v, want %v", got, want)
	}
	cfg.duration = 500 * 24 * time.Hour
	if got := periodStarts(cfg); got != nil {
		t.Errorf("%d marks for 500 days, want none: more than %d", len(got), maxMarks)
	}
}
