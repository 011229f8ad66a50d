package engine

import (
	"errors"
	"fmt"
	"time"
)

// Period is how long a calendar quota lasts before it renews.
type Period uint8

// The periods of a Calendar.
const (
	Daily Period = iota + 1
	Weekly
	Monthly
	Yearly
)

var periodNames = [...]string{Daily: "day", Weekly: "week", Monthly: "month", Yearly: "year"}

// String is the period's name in the rules: "day", "week", "month" or
// "year".
func (p Period) String() string {
	if p >= Daily && p <= Yearly {
		return periodNames[p]
	}
	return fmt.Sprintf("Period(%d)", uint8(p))
}

// ParsePeriod reads a period's name ("day", "week", "month", "year").
func ParsePeriod(s string) (Period, error) {
	for p := Daily; p <= Yearly; p++ {
		if periodNames[p] == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf(`engine: period must be "day", "week", "month" or "year", got %q`, s)
}

// Nominal is the period's usual length: 1, 7, 30 or 365 days. A calendar's
// real periods differ (months, leap years, daylight saving); Nominal is
// what a rate or a header field that needs one length is computed from.
func (p Period) Nominal() time.Duration {
	switch p {
	case Daily:
		return 24 * time.Hour
	case Weekly:
		return 7 * 24 * time.Hour
	case Monthly:
		return 30 * 24 * time.Hour
	case Yearly:
		return 365 * 24 * time.Hour
	}
	return 0
}

// Calendar says where the periods of a calendar quota begin: at an anchor
// of the local calendar of a time zone. The zero value of each anchor field
// is the first of its range: a day starting at midnight, a week on Monday,
// a month on the 1st, a year on January 1st.
//
// A period begins at the first instant at which the zone's clock reads the
// anchor or later. So an anchor hour that a daylight-saving change skips
// begins the period at the change (02:00 on a night that jumps from 02:00
// to 03:00 begins at the jump, 03:00 local); one that occurs twice begins
// it at the first (01:00 on a night that falls back from 02:00 to 01:00
// begins at the first 01:00). An anchor day that a month lacks (the 31st
// of April, the 29th of February of most years) renews on its last day.
type Calendar struct {
	Period Period
	// Location is the time zone whose clock the anchor is read on; nil
	// is UTC.
	Location *time.Location
	// Month is a Yearly period's first month: 1 to 12; 0 is January.
	Month time.Month
	// Day is a Monthly or Yearly period's first day of the month: 1 to 31;
	// 0 is the 1st.
	Day int
	// Weekday is a Weekly period's first day, as ISO 8601 numbers it: 1
	// (Monday) to 7 (Sunday); 0 is Monday.
	Weekday int
	// Hour is the hour of the first day at which the period begins: 0 to
	// 23.
	Hour int
}

// Check reports every field of c outside its range, each as a *LimitError
// naming it (Period, Month, Day, Weekday, Hour), and the anchor fields that
// c's period does not read.
func (c Calendar) Check() error {
	var errs []error
	bad := func(field, must string, got any) {
		errs = append(errs, &LimitError{Field: field, Must: must, Got: fmt.Sprint(got)})
	}
	if c.Period < Daily || c.Period > Yearly {
		bad("Period", "be Daily, Weekly, Monthly or Yearly", uint8(c.Period))
	}
	if c.Hour < 0 || c.Hour > 23 {
		bad("Hour", "be between 0 and 23", c.Hour)
	}
	if c.Month < 0 || c.Month > 12 {
		bad("Month", "be between 1 and 12 (0 is January)", int(c.Month))
	} else if c.Month != 0 && c.Period != Yearly {
		bad("Month", "be 0: only a yearly period has a first month", int(c.Month))
	}
	if c.Day < 0 || c.Day > 31 {
		bad("Day", "be between 1 and 31 (0 is the 1st)", c.Day)
	} else if c.Day != 0 && c.Period != Monthly && c.Period != Yearly {
		bad("Day", "be 0: only a monthly or yearly period has a first day of the month", c.Day)
	} else if c.Period == Yearly && c.Day > daysIn(2024, c.month()) {
		bad("Day", fmt.Sprintf("be at most %d, the length of %v", daysIn(2024, c.month()), c.month()), c.Day)
	}
	if c.Weekday < 0 || c.Weekday > 7 {
		bad("Weekday", "be between 1 (Monday) and 7 (Sunday); 0 is Monday", c.Weekday)
	} else if c.Weekday != 0 && c.Period != Weekly {
		bad("Weekday", "be 0: only a weekly period has a first weekday", c.Weekday)
	}
	return errors.Join(errs...)
}

func (c Calendar) loc() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

func (c Calendar) month() time.Month { return max(c.Month, time.January) }
func (c Calendar) day() int          { return max(c.Day, 1) }

// Bounds returns the period that holds t: it began at start, at or before
// t, and ends at end, after t, when the next begins. c must pass Check.
func (c Calendar) Bounds(t time.Time) (start, end time.Time) {
	loc := c.loc()
	y, m, d := t.In(loc).Date()
	// first is the first day of a period that begins near t (in the same
	// unit as the local date of t); step moves it by k periods.
	var first func(k int) (int, time.Month, int)
	switch c.Period {
	case Daily:
		first = func(k int) (int, time.Month, int) { return y, m, d + k }
	case Weekly:
		// ISO weekday of t's local date, 1 (Monday) to 7 (Sunday).
		wd := int(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday()+6)%7 + 1
		back := (wd - max(c.Weekday, 1) + 7) % 7
		first = func(k int) (int, time.Month, int) { return y, m, d - back + 7*k }
	case Monthly:
		first = func(k int) (int, time.Month, int) {
			fy, fm, _ := time.Date(y, m+time.Month(k), 1, 0, 0, 0, 0, time.UTC).Date()
			return fy, fm, min(c.day(), daysIn(fy, fm))
		}
	default:
		first = func(k int) (int, time.Month, int) {
			return y + k, c.month(), min(c.day(), daysIn(y+k, c.month()))
		}
	}
	begin := func(k int) time.Time {
		fy, fm, fd := first(k)
		return firstAtOrAfter(fy, fm, fd, c.Hour, loc)
	}
	// The period of t's local date begins at begin(0), unless t is
	// before it (the anchor hour has not come yet): then at begin(-1).
	k := 0
	if t.Before(begin(0)) {
		k = -1
	}
	return begin(k), begin(k + 1)
}

// daysIn is the number of days in month m of year y.
func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// firstAtOrAfter is the first instant at which loc's clock reads the date
// y-m-d (normalised as time.Date does) at hour:00, or later.
func firstAtOrAfter(y int, m time.Month, d, hour int, loc *time.Location) time.Time {
	wall := time.Date(y, m, d, hour, 0, 0, 0, time.UTC).Unix()
	// Go picks one instant for a wall time a change repeats or skips, and
	// does not say which. The zone's spans (ZoneBounds) around its pick
	// hold every candidate: a change is weeks apart from the next.
	guess := time.Date(y, m, d, hour, 0, 0, 0, loc)
	type span struct {
		start, end int64 // minUnix, maxUnix: unbounded
		offset     int64
	}
	spanOf := func(t time.Time) span {
		s, e := t.ZoneBounds()
		_, off := t.Zone()
		return span{unixOr(s, minUnix), unixOr(e, maxUnix), int64(off)}
	}
	var spans [3]span
	n := 0
	mid := spanOf(guess)
	if mid.start != minUnix {
		spans[n] = spanOf(time.Unix(mid.start-1, 0).In(loc))
		n++
	}
	spans[n] = mid
	n++
	if mid.end != maxUnix {
		spans[n] = spanOf(time.Unix(mid.end, 0).In(loc))
		n++
	}
	// The earliest instant whose clock reads the wall time exactly.
	var best int64
	found := false
	for _, sp := range spans[:n] {
		if u := wall - sp.offset; u >= sp.start && u < sp.end && (!found || u < best) {
			best, found = u, true
		}
	}
	if !found {
		// The wall time is skipped: the first instant after the gap,
		// where the clock jumps past it.
		for _, sp := range spans[:n] {
			if sp.start != minUnix && sp.start+sp.offset > wall && (!found || sp.start < best) {
				best, found = sp.start, true
			}
		}
	}
	if !found {
		return guess
	}
	return time.Unix(best, 0).In(loc)
}

// minUnix and maxUnix stand for a span without a known start or end.
const (
	minUnix = -1 << 62
	maxUnix = 1 << 62
)

func unixOr(t time.Time, def int64) int64 {
	if t.IsZero() {
		return def
	}
	return t.Unix()
}
