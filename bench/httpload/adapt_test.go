package main

import (
	"strings"
	"testing"
	"time"
)

// The figures of a run: at the drop, the p99 must be under the target for
// three seconds in a row (a single good second does not count), the
// admitted rate is averaged over the 10 s from the end of the first of
// them; at the rise, the run ends before 10 s have passed, and the rate
// reaches 90 % of the capacity in the second it is first scraped there.
func TestFigures(t *testing.T) {
	const n = 30
	secs := make([]clientSecond, n)
	up := make([]second, n)
	for i := range n {
		up[i] = second{Capacity: 1000, Served: 100, P99: 10 * time.Millisecond}
		secs[i] = clientSecond{admitted: 100, rate: 1000, scraped: true}
		if i >= 5 && i < 22 {
			up[i].Capacity = 200
			secs[i].rate = 150
		}
	}
	// After the drop at 5: bad until 9, one good second at 9, bad at 10,
	// good from 11 on.
	for i := 5; i < 11; i++ {
		if i != 9 {
			up[i].P99 = 800 * time.Millisecond
		}
	}
	for i := 12; i < 22; i++ {
		secs[i].admitted = 180 // the 10 s from 12, the end of second 11
	}
	secs[21].admitted = 200
	// After the rise at 22: the rate climbs, scraped at 900 in second 27,
	// not scraped in second 26.
	for i := 22; i < n; i++ {
		secs[i].rate = float64(500 + 100*(i-22))
	}
	secs[26].scraped = false
	got := figures(secs, up, 50*time.Millisecond)
	want := []string{
		"BenchmarkAdaptive/change=drop/at=5s 1 200 capacity/s 7 settle-s 182.0 admitted/s 100.0 served/s 91.0 pct-of-capacity",
		"BenchmarkAdaptive/change=rise/at=22s 1 1000 capacity/s 1 settle-s 5 reach90-s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("figures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A p99 never back under the target, and a second without a
	// response, which has no p99 to judge: no settling.
	for i := 5; i < n; i++ {
		up[i].P99 = 800 * time.Millisecond
	}
	up[12], up[13], up[14] = second{Capacity: 200}, second{Capacity: 200, Served: 1}, second{Capacity: 200, Served: 1}
	if got := figures(secs, up, 50*time.Millisecond); !strings.HasSuffix(got[0], " -1 settle-s") {
		t.Errorf("drop without settling: %q, want -1 settle-s", got[0])
	}
}

func TestParseSchedule(t *testing.T) {
	sc, err := parseSchedule("1000,20s=200,50s=1000")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{-time.Second, 2000}, {0, 1000}, {19 * time.Second, 1000}, {20 * time.Second, 200}, {49 * time.Second, 200}, {50 * time.Second, 1000}} {
		if got := sc.at(c.at); got != c.want {
			t.Errorf("capacity at %v: %v, want %v", c.at, got, c.want)
		}
	}
	for _, bad := range []string{"", "0", "1000,20s", "1000,20s=200,10s=300", "1000,x=200", "1000,20s=-5"} {
		if _, err := parseSchedule(bad); err == nil || !strings.Contains(err.Error(), "--schedule") {
			t.Errorf("parseSchedule(%q): %v, want an error naming --schedule", bad, err)
		}
	}
}
