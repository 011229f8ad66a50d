package engine_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// "10 a second and 100 a day" per API key, as one limiter. Ten requests a
// second pass until the day's 100 are spent; the 11th in a second waits for
// the per-second part, and once the day's are spent, for the day part.
func ExampleAllEngines() {
	perSecond, _ := engine.New(engine.Config{Limit: 10, Burst: 10, SweepInterval: -1})
	perDay, _ := engine.New(engine.Config{Limit: engine.Every(864 * time.Second), Burst: 100, SweepInterval: -1})
	limiter, err := engine.AllEngines(perSecond, perDay)
	if err != nil {
		panic(err) // a nil part, or more than engine.MaxParts
	}
	defer limiter.Close()
	names := []string{"per second", "per day"}
	var clock time.Time
	parts := make([]engine.Decision, 2)
	for s := range 11 {
		now := clock.Add(time.Duration(s) * time.Second)
		admitted := 0
		for limiter.AllowAt(now, "key:42", 1).Allowed {
			admitted++
		}
		// A denial takes nothing, so asking again is free.
		d := limiter.AllowAt(now, "key:42", 1)
		limiter.TakePartsAt(now, "key:42", 1, parts)
		var waiting []string
		for i, p := range parts {
			if p.RetryAfter > 0 {
				waiting = append(waiting, fmt.Sprintf("%s %v", names[i], p.RetryAfter.Round(time.Millisecond)))
			}
		}
		if s == 0 || s >= 9 { // seconds 1 to 8 are as second 0
			fmt.Printf("second %2d: %2d admitted, then retry after %v (%s)\n", s, admitted, d.RetryAfter.Round(time.Millisecond), strings.Join(waiting, ", "))
		}
	}
	// Output:
	// second  0: 10 admitted, then retry after 100ms (per second 100ms)
	// second  9: 10 admitted, then retry after 14m15s (per second 100ms, per day 14m15s)
	// second 10:  0 admitted, then retry after 14m14s (per day 14m14s)
}
