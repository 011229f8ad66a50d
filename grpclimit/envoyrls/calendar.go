package envoyrls

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/faucetgo/faucet/engine"
)

// calendarKey is faucet's extension of the format: a rate_limit's calendar
// makes its limit a calendar quota. The reference server refuses a file
// that has one (an unknown key).
const calendarKey = "calendar"

// fileCalendar is a rate_limit's calendar as the file holds it. It is read
// field by field, so that each problem names its field.
type fileCalendar map[string]any

// calendarPeriods are the units a calendar can renew on.
var calendarPeriods = map[pb.RateLimitResponse_RateLimit_Unit]engine.Period{
	pb.RateLimitResponse_RateLimit_DAY:   engine.Daily,
	pb.RateLimitResponse_RateLimit_WEEK:  engine.Weekly,
	pb.RateLimitResponse_RateLimit_MONTH: engine.Monthly,
	pb.RateLimitResponse_RateLimit_YEAR:  engine.Yearly,
}

// calendarFields are a calendar's keys, and the engine.Calendar field of
// each anchor.
var calendarFields = map[string]string{"time_zone": "", "month": "Month", "day": "Day", "weekday": "Weekday", "hour": "Hour"}

// weekdays are the names of a calendar's weekday, Monday first (ISO 8601
// numbers them 1 to 7).
var weekdays = [...]string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

// loadCalendar reads the calendar of rate_limit rl at path p (its unit
// unit, valid when unitOK), adding every problem to ce. It returns nil
// when there is a problem.
func loadCalendar(ce *ConfigError, p string, rl *fileRateLimit, unit pb.RateLimitResponse_RateLimit_Unit, unitOK bool) *engine.Calendar {
	problems := len(ce.Problems)
	bad := func(field, format string, args ...any) {
		ce.Problems = append(ce.Problems, fmt.Sprintf("%s%s: %s", p, field, fmt.Sprintf(format, args...)))
	}
	period, periodOK := calendarPeriods[unit]
	switch {
	case rl.Unlimited:
		bad("", "an unlimited rate_limit takes no calendar")
	case unitOK && !periodOK:
		bad("", "only a unit of day, week, month or year takes a calendar, got %s", strings.ToLower(unit.String()))
	}
	c := engine.Calendar{Period: period}
	// got is each anchor as written, for the messages of Calendar.Check.
	got := map[string]string{}
	keys := make([]string, 0, len(rl.Calendar))
	for k := range rl.Calendar {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := rl.Calendar[k]
		field := "." + k
		if _, known := calendarFields[k]; !known {
			bad(field, "unknown key; a calendar has time_zone, month, day, weekday and hour")
			continue
		}
		if v == nil {
			continue // null: the default, as if absent
		}
		got[calendarFields[k]] = fmt.Sprintf("%q", v)
		switch k {
		case "time_zone":
			name, ok := v.(string)
			loc, err := loadZone(name)
			if !ok || err != nil {
				bad(field, `must be an IANA time zone name such as "Europe/Berlin", got %q`, fmt.Sprint(v))
			}
			c.Location = loc
		case "weekday":
			name, _ := v.(string)
			i := slices.Index(weekdays[:], strings.ToLower(name))
			if i < 0 {
				bad(field, `must be "monday" to "sunday", got %q`, fmt.Sprint(v))
			}
			c.Weekday = i + 1
		default:
			n, ok := v.(int)
			if !ok {
				bad(field, "must be an integer, got %q", fmt.Sprint(v))
				continue
			}
			got[calendarFields[k]] = fmt.Sprint(n)
			switch k {
			case "month":
				c.Month = time.Month(n)
			case "day":
				c.Day = n
			case "hour":
				c.Hour = n
			}
		}
	}
	if periodOK {
		for _, le := range engine.LimitErrors(c.Check()) {
			for k, f := range calendarFields {
				if f == le.Field && f != "" {
					bad("."+k, "must %s, got %s", le.Must, cmp.Or(got[f], le.Got))
				}
			}
		}
	}
	if len(ce.Problems) > problems || !periodOK {
		return nil
	}
	return &c
}

// loadZone loads an IANA time zone. "" is UTC; "Local", the zone of the
// machine that happens to load the file, is refused.
func loadZone(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, errors.New("not a zone name")
	}
	return time.LoadLocation(name)
}
