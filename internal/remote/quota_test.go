package remote

import (
	"errors"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Bounds are the calendar's ends of the period that holds now and of the
// next, rounded up to a minute, from the quota's calendar (cached across
// takes, not across a period's end) or the take's own.
func TestQuotaBounds(t *testing.T) {
	ist := time.FixedZone("IST", 5*3600+30*60+17) // an offset of odd seconds
	own := engine.Calendar{Period: engine.Daily, Hour: 9, Location: ist}
	q, err := NewQuota(5, own, errInvalid)
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 1, 12, 0, 0, 0, ist)
	for _, now := range []time.Time{day, day.Add(time.Hour), day.Add(24 * time.Hour), day.Add(-4 * time.Hour)} {
		capacity, b1, b2 := q.Bounds(now, nil)
		_, end := own.Bounds(now)
		_, next := own.Bounds(end)
		if capacity != 5000 || !b1.Equal(ceilMinute(end)) || !b2.Equal(ceilMinute(next)) || b1.Unix()%60 != 0 || !b1.After(end) {
			t.Errorf("Bounds(%v) = %d, %v, %v; want 5000, %v and %v rounded up to a minute", now, capacity, b1, b2, end, next)
		}
	}
	weekly := engine.Calendar{Period: engine.Weekly, Weekday: 3}
	_, b1, b2 := q.Bounds(day, &weekly)
	if want := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC); !b1.Equal(want) || !b2.Equal(want.AddDate(0, 0, 7)) {
		t.Errorf("a take's weekly calendar: %v, %v; want %v and a week later", b1, b2, want)
	}
	if err := q.Set(0, engine.Calendar{Period: engine.Daily}, errInvalid); !errors.Is(err, errInvalid) || q.Burst() != 5 {
		t.Errorf("Set(0) = %v, Burst %v; want errInvalid, 5 kept", err, q.Burst())
	}
}

// QuotaDecision is engine.Quota's: waits to the period's end, the
// remainder of a quota lowered below what was used is 0.
func TestQuotaDecision(t *testing.T) {
	now := int64(1_000_000_000)
	end := now + 90_000_000
	for _, tc := range []struct {
		capacity, cost      uint64
		never, denied, wait bool
		used                int64
		want                engine.Decision
	}{
		{5000, 1000, false, false, false, 1000, engine.Decision{Allowed: true, Remaining: 4, ResetAfter: 90 * time.Second}},
		{5000, 0, false, false, false, 0, engine.Decision{Allowed: true, Remaining: 5}},
		{5000, 1000, false, true, false, 4500, engine.Decision{Remaining: 0.5, RetryAfter: 90 * time.Second, ResetAfter: 90 * time.Second}},
		{5000, 1000, false, true, false, 1000, engine.Decision{Remaining: 4, ResetAfter: 90 * time.Second}},
		{3000, 0, false, true, false, 4000, engine.Decision{Remaining: 0, RetryAfter: 90 * time.Second, ResetAfter: 90 * time.Second}},
		{5000, 1000, false, false, true, 4500, engine.Decision{Allowed: true, Remaining: 0.5, RetryAfter: 90 * time.Second, ResetAfter: 90 * time.Second}},
		{5000, 5001, true, true, false, 0, engine.Decision{Remaining: 5, RetryAfter: engine.InfDuration}},
	} {
		got, err := QuotaDecision(tc.capacity, tc.cost, tc.never, tc.denied, tc.wait, end, tc.used, now)
		if err != nil || got != tc.want {
			t.Errorf("%+v: %+v, %v; want %+v", tc, got, err, tc.want)
		}
	}
	if _, err := QuotaDecision(5000, 1, false, false, false, now, 1, now); err == nil {
		t.Error("a period that ended at now read as in force")
	}
}
