package fuzz

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// documented reports whether a Config lies in the domain the engine's
// documentation promises to accept, re-derived from the documentation.
func documented(c engine.Config) (ok bool, field string) {
	r := float64(c.Limit)
	if !(r >= 1.0/(366*86400) && r <= 1e9) {
		return false, "Limit"
	}
	b := c.Burst
	if !(b >= 1 && b <= 1e9) {
		return false, "Burst"
	}
	k := math.Round(b * 1000)
	if k/1000 != b {
		return false, "Burst"
	}
	if b/r > 366*86400 { // in float64, as documented
		return false, "Burst/Limit"
	}
	if n := c.Shards; n != 0 && (n < 1 || n > 65536 || n&(n-1) != 0) {
		return false, "Shards"
	}
	if s := c.SweepInterval; s > 0 && s < time.Millisecond {
		return false, "SweepInterval"
	}
	if c.MaxKeys < 0 {
		return false, "MaxKeys"
	}
	return true, ""
}

// FuzzConfig: New never panics, fails exactly outside the documented domain,
// and its error wraps ErrInvalidConfig and names the offending field.
func FuzzConfig(f *testing.F) {
	f.Add(10.0, 20.0, 0, int64(0), 0)
	f.Add(1.0/86400, 366.0, 1, int64(-1), 0)
	f.Add(1.0/(366*86400), 1.0, 1, int64(-1), 0)
	f.Add(1.0/(366*86400+1), 1.0, 1, int64(-1), 0)
	f.Add(12.0/(366*86400), 12.0, 0, int64(0), 0) // 12 a year, its float a hair low
	f.Add(1e9, 1e9, 65536, int64(17*time.Second), 1)
	f.Add(0.0, 1.0, 3, int64(time.Microsecond), -1)
	f.Add(math.NaN(), math.Inf(1), -4, int64(time.Hour), 5)
	f.Add(1e-5, 1.0005, 1<<17, int64(math.MaxInt64), 0)
	f.Fuzz(func(t *testing.T, limit, burst float64, shards int, sweep int64, maxKeys int) {
		cfg := engine.Config{Limit: engine.Limit(limit), Burst: burst, Shards: shards, SweepInterval: time.Duration(sweep), MaxKeys: maxKeys}
		if cfg.Shards > 1<<12 {
			cfg.Shards = 1 << 12 // keep allocations small: larger powers of two add nothing
		}
		want, field := documented(cfg)
		e, err := engine.New(cfg)
		if want {
			if err != nil {
				t.Fatalf("New(%+v) = %v, but the config is in the documented domain", cfg, err)
			}
			e.Close()
			return
		}
		if err == nil {
			e.Close()
			t.Fatalf("New(%+v) succeeded, but %s is outside the documented domain", cfg, field)
		}
		if !errors.Is(err, engine.ErrInvalidConfig) {
			t.Fatalf("error %q does not wrap ErrInvalidConfig", err)
		}
		if !strings.Contains(err.Error(), field) {
			t.Fatalf("error %q does not name %s", err, field)
		}
	})
}
