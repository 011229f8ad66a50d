package envoyrls

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests' zones, whatever the machine has

	"github.com/faucetgo/faucet/engine"
)

// calendarFile is a domain with one limit of unit and the calendar cal (a
// YAML flow mapping, or "" for none).
func calendarFile(unit, cal string) string {
	s := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: " + unit + "\n      requests_per_unit: 1000\n"
	if cal != "" {
		s += "      calendar: " + cal + "\n"
	}
	return s
}

// A rate_limit's calendar makes its limit a calendar quota of its unit,
// anchored as it says; without one a limit has none.
func TestParseDomainCalendar(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		unit, cal string
		want      *engine.Calendar
	}{
		"none":              {"month", "", nil},
		"defaults":          {"month", "{}", &engine.Calendar{Period: engine.Monthly}},
		"null fields":       {"day", "{time_zone: null, hour: ~}", &engine.Calendar{Period: engine.Daily}},
		"month":             {"month", "{time_zone: Europe/Berlin, day: 15, hour: 0}", &engine.Calendar{Period: engine.Monthly, Location: berlin, Day: 15}},
		"week":              {"WEEK", "{weekday: Sunday, hour: 6}", &engine.Calendar{Period: engine.Weekly, Weekday: 7, Hour: 6}},
		"year":              {"year", "{month: 4, day: 6}", &engine.Calendar{Period: engine.Yearly, Month: time.April, Day: 6}},
		"day":               {"Day", "{hour: 23, time_zone: UTC}", &engine.Calendar{Period: engine.Daily, Location: time.UTC, Hour: 23}},
		"empty zone is UTC": {"day", "{time_zone: ''}", &engine.Calendar{Period: engine.Daily, Location: time.UTC}},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := ParseDomain(name+".yaml", []byte(calendarFile(tc.unit, tc.cal)))
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			got := d.Limits()[0].Calendar
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("calendar %+v, want none", *got)
			case tc.want == nil:
				return
			case got == nil:
				t.Fatalf("no calendar, want %+v", *tc.want)
			}
			if got.Period != tc.want.Period || got.Month != tc.want.Month || got.Day != tc.want.Day ||
				got.Weekday != tc.want.Weekday || got.Hour != tc.want.Hour || got.Location.String() != tc.want.Location.String() {
				t.Errorf("calendar %+v, want %+v", *got, *tc.want)
			}
		})
	}
}

// Every bad calendar field is named by its place in the file, as the
// format's other problems are.
func TestParseDomainRejectsCalendar(t *testing.T) {
	const at = "descriptors[0].rate_limit.calendar"
	for name, tc := range map[string]struct {
		src  string
		want []string
	}{
		"second":             {calendarFile("second", "{}"), []string{at + ": only a unit of day, week, month or year takes a calendar, got second"}},
		"hour unit":          {calendarFile("hour", "{hour: 3}"), []string{at + ": only a unit of day, week, month or year takes a calendar, got hour"}},
		"bad unit":           {calendarFile("fortnight", "{}"), []string{`descriptors[0].rate_limit.unit: "fortnight" is not one of`}},
		"unlimited":          {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true, calendar: {}}}\n", []string{at + ": an unlimited rate_limit takes no calendar"}},
		"unknown zone":       {calendarFile("month", "{time_zone: Mars/Olympus_Mons}"), []string{at + `.time_zone: must be an IANA time zone name such as "Europe/Berlin", got "Mars/Olympus_Mons"`}},
		"local zone":         {calendarFile("month", "{time_zone: Local}"), []string{at + `.time_zone: must be an IANA time zone name`}},
		"zone not string":    {calendarFile("month", "{time_zone: 3}"), []string{at + `.time_zone: must be an IANA time zone name such as "Europe/Berlin", got "3"`}},
		"day 32":             {calendarFile("month", "{day: 32}"), []string{at + ".day: must", "got 32"}},
		"negative day":       {calendarFile("month", "{day: -1}"), []string{at + ".day: must", "got -1"}},
		"day of a week":      {calendarFile("week", "{day: 3}"), []string{at + ".day: must", "only a monthly or yearly period", "got 3"}},
		"day 30 of february": {calendarFile("year", "{month: 2, day: 30}"), []string{at + ".day: must", "February", "got 30"}},
		"hour 24":            {calendarFile("day", "{hour: 24}"), []string{at + ".hour: must", "got 24"}},
		"hour as text":       {calendarFile("day", "{hour: '3'}"), []string{at + `.hour: must be an integer, got "3"`}},
		"hour as float":      {calendarFile("day", "{hour: 3.5}"), []string{at + `.hour: must be an integer, got "3.5"`}},
		"month 13":           {calendarFile("year", "{month: 13}"), []string{at + ".month: must", "got 13"}},
		"month of a month":   {calendarFile("month", "{month: 3}"), []string{at + ".month: must", "only a yearly period", "got 3"}},
		"bad weekday":        {calendarFile("week", "{weekday: funday}"), []string{at + `.weekday: must be "monday" to "sunday", got "funday"`}},
		"weekday number":     {calendarFile("week", "{weekday: 3}"), []string{at + `.weekday: must be "monday" to "sunday", got "3"`}},
		"weekday of a day":   {calendarFile("day", "{weekday: friday}"), []string{at + ".weekday: must", "only a weekly period", `got "friday"`}},
		"unknown key":        {calendarFile("month", "{day: 1, minute: 5}"), []string{at + ".minute: unknown key; a calendar has time_zone, month, day, weekday and hour"}},
		"not a mapping":      {calendarFile("month", "monthly"), []string{"cannot unmarshal !!str `monthly` into a mapping (calendar)"}},
		"a list":             {calendarFile("month", "[1]"), []string{"into a mapping (calendar)"}},
		"in a descriptor":    {"domain: d\ndescriptors:\n  - {key: k, calendar: {}, rate_limit: {unit: day, requests_per_unit: 1}}\n", []string{"descriptors[0].calendar: a calendar belongs in a rate_limit"}},
		"at the top":         {"domain: d\ncalendar: {}\n", []string{"calendar: a calendar belongs in a rate_limit"}},
		"every problem":      {calendarFile("month", "{time_zone: Nowhere, day: 40, hour: -2, weekday: monday}"), []string{at + ".time_zone:", at + ".day:", at + ".hour:", at + ".weekday:"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDomain(name+".yaml", []byte(tc.src))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a *ConfigError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}
