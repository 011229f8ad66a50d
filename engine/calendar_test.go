package engine_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests' zones, whatever the machine has

	"github.com/faucetgo/faucet/engine"
)

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Periods begin where the documentation says, daylight-saving changes and
// short months included.
func TestCalendarBounds(t *testing.T) {
	ny := zone(t, "America/New_York")
	lh := zone(t, "Australia/Lord_Howe") // changes by 30 minutes
	apia := zone(t, "Pacific/Apia")      // skipped 2011-12-30 whole
	for _, tc := range []struct {
		name       string
		c          engine.Calendar
		at         string
		start, end string
	}{
		{"day UTC", engine.Calendar{Period: engine.Daily}, "2026-03-08T12:00:00Z", "2026-03-08T00:00:00Z", "2026-03-09T00:00:00Z"},
		{"day before its hour", engine.Calendar{Period: engine.Daily, Hour: 6}, "2026-03-08T05:59:59Z", "2026-03-07T06:00:00Z", "2026-03-08T06:00:00Z"},
		// New York springs forward at 02:00 on 2026-03-08: 02:00 does
		// not exist, the day begins at the jump (03:00 EDT, 07:00 UTC).
		{"skipped hour", engine.Calendar{Period: engine.Daily, Hour: 2, Location: ny}, "2026-03-08T12:00:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"},
		{"day of 23 hours", engine.Calendar{Period: engine.Daily, Location: ny}, "2026-03-08T12:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"},
		// It falls back at 02:00 on 2026-11-01: 01:00 occurs twice, the
		// day begins at the first (01:00 EDT, 05:00 UTC).
		{"repeated hour", engine.Calendar{Period: engine.Daily, Hour: 1, Location: ny}, "2026-11-01T05:30:00Z", "2026-11-01T05:00:00Z", "2026-11-02T06:00:00Z"},
		{"repeated hour, second pass", engine.Calendar{Period: engine.Daily, Hour: 1, Location: ny}, "2026-11-01T06:30:00Z", "2026-11-01T05:00:00Z", "2026-11-02T06:00:00Z"},
		{"half-hour change", engine.Calendar{Period: engine.Daily, Hour: 2, Location: lh}, "2026-10-04T12:00:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:00:00Z"},
		{"after the skipped day", engine.Calendar{Period: engine.Daily, Location: apia}, "2011-12-30T11:00:00Z", "2011-12-30T10:00:00Z", "2011-12-31T10:00:00Z"},
		{"before the skipped day", engine.Calendar{Period: engine.Daily, Location: apia}, "2011-12-30T09:00:00Z", "2011-12-29T10:00:00Z", "2011-12-30T10:00:00Z"},
		{"week from Monday", engine.Calendar{Period: engine.Weekly}, "2026-11-29T12:00:00Z", "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"},
		{"week from Sunday 09:00", engine.Calendar{Period: engine.Weekly, Weekday: 7, Hour: 9}, "2026-11-29T08:00:00Z", "2026-11-22T09:00:00Z", "2026-11-29T09:00:00Z"},
		{"month", engine.Calendar{Period: engine.Monthly}, "2026-11-29T12:00:00Z", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"billing day 31 in April", engine.Calendar{Period: engine.Monthly, Day: 31}, "2026-04-30T12:00:00Z", "2026-04-30T00:00:00Z", "2026-05-31T00:00:00Z"},
		{"billing day 31 before April's last", engine.Calendar{Period: engine.Monthly, Day: 31}, "2026-04-29T12:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"},
		{"billing day 30 in February", engine.Calendar{Period: engine.Monthly, Day: 30}, "2028-02-29T12:00:00Z", "2028-02-29T00:00:00Z", "2028-03-30T00:00:00Z"},
		{"month in a zone", engine.Calendar{Period: engine.Monthly, Day: 15, Hour: 9, Location: ny}, "2026-11-15T13:59:59Z", "2026-10-15T13:00:00Z", "2026-11-15T14:00:00Z"},
		{"year", engine.Calendar{Period: engine.Yearly}, "2026-11-29T12:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"year from 29 February", engine.Calendar{Period: engine.Yearly, Month: 2, Day: 29}, "2027-03-01T00:00:00Z", "2027-02-28T00:00:00Z", "2028-02-29T00:00:00Z"},
	} {
		start, end := tc.c.Bounds(utc(tc.at))
		if !start.Equal(utc(tc.start)) || !end.Equal(utc(tc.end)) {
			t.Errorf("%s: Bounds(%s) = [%s, %s), want [%s, %s)", tc.name, tc.at,
				start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), tc.start, tc.end)
		}
	}
}

// For any zone, anchor and instant, the period holds the instant, the next
// begins where it ends, and a period is never shorter than its shortest
// calendar length less a skipped day (Pacific/Apia skipped one) and two
// hours, nor longer than its nominal length plus a day and two hours.
func TestCalendarBoundsProperties(t *testing.T) {
	zones := []string{"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Apia",
		"America/Sao_Paulo", "Asia/Kathmandu", "America/St_Johns", "Europe/Dublin", "Africa/Casablanca", "Antarctica/Troll"}
	rng := rand.New(rand.NewPCG(1, 2))
	lo, hi := utc("2005-01-01T00:00:00Z").Unix(), utc("2040-01-01T00:00:00Z").Unix()
	for i := range 40000 {
		c := engine.Calendar{Period: engine.Period(1 + rng.IntN(4)), Location: zone(t, zones[rng.IntN(len(zones))]), Hour: rng.IntN(24)}
		switch c.Period {
		case engine.Weekly:
			c.Weekday = rng.IntN(8)
		case engine.Monthly:
			c.Day = rng.IntN(32)
		case engine.Yearly:
			c.Month = time.Month(1 + rng.IntN(12))
			c.Day = 1 + rng.IntN(28)
		}
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
		at := time.Unix(lo+rng.Int64N(hi-lo), 0)
		start, end := c.Bounds(at)
		if at.Before(start) || !at.Before(end) {
			t.Fatalf("case %d %+v at %v: [%v, %v) does not hold it", i, c, at, start, end)
		}
		if s2, e2 := c.Bounds(start); !s2.Equal(start) || !e2.Equal(end) {
			t.Fatalf("case %d %+v: Bounds(start %v) = [%v, %v), want the same period", i, c, start, s2, e2)
		}
		if s3, _ := c.Bounds(end); !s3.Equal(end) {
			t.Fatalf("case %d %+v: the period after [%v, %v) begins at %v", i, c, start, end, s3)
		}
		if s4, e4 := c.Bounds(end.Add(-time.Second)); !s4.Equal(start) || !e4.Equal(end) {
			t.Fatalf("case %d %+v: a second before the end, [%v, %v)", i, c, s4, e4)
		}
		d := end.Sub(start)
		shortest := 22 * time.Hour
		switch c.Period {
		case engine.Weekly:
			shortest = 5*24*time.Hour + 22*time.Hour
		case engine.Monthly:
			shortest = 27 * 24 * time.Hour
		case engine.Yearly:
			shortest = 364 * 24 * time.Hour
		}
		if d < shortest || d > c.Period.Nominal()+26*time.Hour {
			t.Fatalf("case %d %+v at %v: a period of %v", i, c, at, d)
		}
	}
}

// Every field out of range is reported, each by name.
func TestCalendarCheck(t *testing.T) {
	for _, tc := range []struct {
		c      engine.Calendar
		fields []string
	}{
		{engine.Calendar{}, []string{"Period"}},
		{engine.Calendar{Period: 9}, []string{"Period"}},
		{engine.Calendar{Period: engine.Monthly, Day: 32, Hour: 24}, []string{"Hour", "Day"}},
		{engine.Calendar{Period: engine.Monthly, Day: -1}, []string{"Day"}},
		{engine.Calendar{Period: engine.Daily, Day: 3, Weekday: 2, Month: 4}, []string{"Month", "Day", "Weekday"}},
		{engine.Calendar{Period: engine.Weekly, Weekday: 8}, []string{"Weekday"}},
		{engine.Calendar{Period: engine.Yearly, Month: 13}, []string{"Month"}},
		{engine.Calendar{Period: engine.Yearly, Month: 4, Day: 31}, []string{"Day"}},
	} {
		err := tc.c.Check()
		var got []string
		for _, le := range engine.LimitErrors(err) {
			got = append(got, le.Field)
		}
		if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
			t.Errorf("%+v: fields %v (%v), want %v", tc.c, got, err, tc.fields)
		}
		if err != nil && !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%+v: %v does not wrap ErrInvalidConfig", tc.c, err)
		}
	}
	for _, ok := range []engine.Calendar{{Period: engine.Daily, Hour: 23}, {Period: engine.Weekly, Weekday: 7},
		{Period: engine.Monthly, Day: 31}, {Period: engine.Yearly, Month: 2, Day: 29}} {
		if err := ok.Check(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}
