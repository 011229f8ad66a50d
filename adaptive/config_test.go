package adaptive

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// Every field out of range is an error that names it and its range; none
// is clamped, none panics.
func TestConfigErrors(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		cfg Config
		msg string
	}{
		{Config{Ceiling: 10, LatencyTarget: ms}, "Floor must be more than 0 and at most 1e9 tokens per second, got 0"},
		{Config{Floor: -1, Ceiling: 10, LatencyTarget: ms}, "Floor must be more than 0 and at most 1e9 tokens per second, got -1"},
		{Config{Floor: math.NaN(), Ceiling: 10, LatencyTarget: ms}, "Floor must be more than 0 and at most 1e9 tokens per second, got NaN"},
		{Config{Floor: 2e9, Ceiling: 3e9, LatencyTarget: ms}, "Floor must be more than 0 and at most 1e9 tokens per second, got 2e+09"},
		{Config{Floor: 10, Ceiling: 5, LatencyTarget: ms}, "Ceiling must be from Floor (10) to 1e9 tokens per second, got 5"},
		{Config{Floor: 10, Ceiling: math.Inf(1), LatencyTarget: ms}, "Ceiling must be from Floor (10) to 1e9 tokens per second, got +Inf"},
		{Config{Floor: 10, Ceiling: 100, Initial: 5, LatencyTarget: ms}, "Initial must be 0 (Ceiling) or from Floor (10) to Ceiling (100), got 5"},
		{Config{Floor: 10, Ceiling: 100, Initial: 101, LatencyTarget: ms}, "Initial must be 0 (Ceiling) or from Floor (10) to Ceiling (100), got 101"},
		{Config{Floor: 10, Ceiling: 100}, "LatencyTarget must be more than 0 and at most 1m0s, got 0s"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: -ms}, "LatencyTarget must be more than 0 and at most 1m0s, got -1ms"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: 2 * time.Minute}, "LatencyTarget must be more than 0 and at most 1m0s, got 2m0s"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Percentile: 1}, "Percentile must be 0 (0.99) or between 0 and 1, both excluded, got 1"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Percentile: -0.5}, "Percentile must be 0 (0.99) or between 0 and 1, both excluded, got -0.5"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Percentile: math.NaN()}, "Percentile must be 0 (0.99) or between 0 and 1, both excluded, got NaN"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, ErrorRate: 1.5}, "ErrorRate must be 0 (0.05) or more than 0 and at most 1, got 1.5"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, ErrorRate: -0.1}, "ErrorRate must be 0 (0.05) or more than 0 and at most 1, got -0.1"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Interval: -time.Second}, "Interval must be 0 (1s) or more than 0 and at most 1h0m0s, got -1s"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Interval: 2 * time.Hour}, "Interval must be 0 (1s) or more than 0 and at most 1h0m0s, got 2h0m0s"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Window: 500 * ms}, "Window must be 0 (5 Intervals) or from Interval (1s) to 100 Intervals (1m40s), got 500ms"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Window: 101 * time.Second}, "Window must be 0 (5 Intervals) or from Interval (1s) to 100 Intervals (1m40s), got 1m41s"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Window: -time.Second}, "Window must be 0 (5 Intervals) or from Interval (1s) to 100 Intervals (1m40s), got -1s"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Decrease: 1}, "Decrease must be 0 (0.7) or between 0 and 1, both excluded, got 1"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Decrease: -0.5}, "Decrease must be 0 (0.7) or between 0 and 1, both excluded, got -0.5"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Increase: 101}, "Increase must be 0 (Ceiling/50) or more than 0 and at most Ceiling (100) tokens per second, got 101"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Increase: -1}, "Increase must be 0 (Ceiling/50) or more than 0 and at most Ceiling (100) tokens per second, got -1"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, Increase: math.NaN()}, "Increase must be 0 (Ceiling/50) or more than 0 and at most Ceiling (100) tokens per second, got NaN"},
		{Config{Floor: 10, Ceiling: 100, LatencyTarget: ms, MinSamples: -1}, "MinSamples must be 0 (the default) or from 1 to 1e9, got -1"},
	} {
		c, err := New(tt.cfg)
		if c != nil || !errors.Is(err, ErrInvalidConfig) || err.Error() != "adaptive: invalid config: "+tt.msg {
			t.Errorf("New(%+v) = %v, %v; want an error wrapping ErrInvalidConfig: %q", tt.cfg, c, err, tt.msg)
		}
	}
}

// The defaults, and the bounds of each range, which are legal.
func TestConfigDefaults(t *testing.T) {
	s, err := Config{Floor: 10, Ceiling: 1000, LatencyTarget: 50 * time.Millisecond}.check()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Floor: 10, Ceiling: 1000, Initial: 1000, LatencyTarget: 50 * time.Millisecond, Percentile: 0.99,
		ErrorRate: 0.05, Window: 5 * time.Second, Interval: time.Second, Decrease: 0.7, Increase: 20, MinSamples: 100}
	if s.Config != want || s.steps != 5 {
		t.Errorf("defaults %+v, %d steps; want %+v, 5 steps", s.Config, s.steps, want)
	}
	for _, cfg := range []Config{
		{Floor: 1e9, Ceiling: 1e9, LatencyTarget: time.Minute, ErrorRate: 1, Interval: time.Hour, Window: 100 * time.Hour, Increase: 1e9},
		{Floor: 1e-9, Ceiling: 1e-9, Initial: 1e-9, LatencyTarget: 1, Percentile: 0.5, Interval: 1, Window: 1, MinSamples: 1},
	} {
		if _, err := New(cfg); err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
	// A Window that is not a whole number of Intervals rounds up.
	if s, _ := (Config{Floor: 1, Ceiling: 1, LatencyTarget: 1, Window: 2500 * time.Millisecond}).check(); s.steps != 3 {
		t.Errorf("Window 2.5s judges %d steps, want 3", s.steps)
	}
	// MinSamples follows the percentile.
	if s, _ := (Config{Floor: 1, Ceiling: 1, LatencyTarget: 1, Percentile: 0.999}).check(); s.MinSamples != 1000 {
		t.Errorf("MinSamples for the 99.9th percentile is %d, want 1000", s.MinSamples)
	}
	if !strings.HasPrefix(ErrInvalidConfig.Error(), "adaptive: ") {
		t.Errorf("ErrInvalidConfig reads %q", ErrInvalidConfig)
	}
}
