package redisstore

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
)

// Check validates a Config with its fallback settings as New does, and
// builds nothing: no fallback engine.
func TestCheckBuildsNothing(t *testing.T) {
	cfg := Config{Limit: 10, Burst: 20, OnFailure: Fallback, FallbackShare: 0.25}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	// settings holds no engine: only validate builds the fallback one.
	s, err := cfg.settings()
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	if f := s.common.FallbackConfig; f.Limit != 2.5 || f.Burst != 5 || f.MaxKeys != failpolicy.DefaultFallbackMaxKeys {
		t.Fatalf("fallback config %+v", f)
	}
	_, core, err := cfg.validate()
	if err != nil || core.Fallback == nil || core.Fallback.Limit() != 2.5 || core.Fallback.Burst() != 5 {
		t.Fatalf("validate: %v, fallback %v; want an engine of 2.5/s and 5", err, core.Fallback)
	}
	core.Close()
	if got := FailurePolicy(7).String(); got != "FailurePolicy(7)" {
		t.Errorf("FailurePolicy(7).String() = %q", got)
	}
}

func TestBadConfig(t *testing.T) {
	good := Config{Limit: 10, Burst: 20}
	for _, tc := range []struct {
		mod   func(*Config)
		field string
	}{
		{func(c *Config) { c.Limit = 0 }, "Limit"},
		{func(c *Config) { c.Limit = engine.Limit(math.NaN()) }, "Limit"},
		{func(c *Config) { c.Limit = 2e9 }, "Limit"},
		{func(c *Config) { c.Burst = 0.5 }, "Burst"},
		{func(c *Config) { c.Burst = 1.0001 }, "Burst"},
		{func(c *Config) { c.Limit, c.Burst = 1.0/86400, 1000 }, "Burst/Limit"},
		{func(c *Config) { c.Prefix = "app{x}:" }, "Prefix"},
		{func(c *Config) { c.Timeout = -time.Millisecond }, "Timeout"},
		{func(c *Config) { c.BreakFor = -time.Second }, "BreakFor"},
		{func(c *Config) { c.MaxBatch = -1 }, "MaxBatch"},
		{func(c *Config) { c.MaxBatch = 1001 }, "MaxBatch"},
		{func(c *Config) { c.OnFailure = FailurePolicy(7) }, "OnFailure"},
		{func(c *Config) { c.OnFailure, c.FallbackShare = Fallback, 0 }, "FallbackShare"},
		{func(c *Config) { c.OnFailure, c.FallbackShare = Fallback, 1.5 }, "FallbackShare"},
		{func(c *Config) { c.OnFailure, c.FallbackShare = Fallback, math.NaN() }, "FallbackShare"},
		{func(c *Config) { c.OnFailure, c.FallbackShare = Fallback, 0.01 }, "FallbackShare"}, // burst 0.2
		{func(c *Config) { c.FallbackShare = 0.5 }, "FallbackShare"},
		{func(c *Config) { c.FallbackMaxKeys = 5 }, "FallbackMaxKeys"},
	} {
		cfg := good
		tc.mod(&cfg)
		_, _, err := cfg.validate()
		if err == nil {
			t.Errorf("%+v: no error", cfg)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v; want ErrInvalidConfig naming %s", cfg, err, tc.field)
		}
		if cerr := cfg.Check(); cerr == nil || cerr.Error() != err.Error() {
			t.Errorf("%+v: Check() = %v, want New's error %v", cfg, cerr, err)
		}
	}
	if err := good.Check(); err != nil {
		t.Errorf("Check() of a good Config: %v", err)
	}
	s, _, err := good.validate()
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Config; d.Prefix != "faucet:" || d.Timeout != 100*time.Millisecond || d.BreakAfter != 5 || d.BreakFor != time.Second || d.MaxBatch != 64 {
		t.Errorf("defaults not applied: %+v", d)
	}
	if _, err := New(nil, good); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New(nil): %v", err)
	}
	if _, err := NewGoRedis(nil, good); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewGoRedis(nil): %v", err)
	}
}

// TestUnitsStayExact checks the integer bounds of the scripts over the whole
// domain: corners, round values and random configurations. Every value a
// script computes must stay below 2^53, the rate fraction must never exceed
// the configured rate, and it must stay close to it.
func TestUnitsStayExact(t *testing.T) {
	type rb struct{ rate, burst float64 }
	cases := []rb{
		{1.0 / 86400, 1}, {1.0 / 31622400, 1}, {12.0 / 31622400, 12}, {1e9, 1}, {1e9, 1e9}, {1e9 / 31622400 * 1.0000001, 1e9},
		{1, 1}, {0.1, 1.5}, {123.456, 50.25}, {1000, 268435}, {1.0 / 3600, 1000}, {3, 1e6},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		burst := math.Round(math.Pow(10, rng.Float64()*9)*1000) / 1000
		minRate := max(1.0/31622400, burst/31622400)
		rate := minRate * math.Pow(1e9/minRate, rng.Float64())
		cases = append(cases, rb{rate, max(burst, 1)})
	}
	var worst float64
	for _, c := range cases {
		cfg := Config{Limit: engine.Limit(c.rate), Burst: c.burst}
		s, _, err := cfg.validate()
		if err != nil {
			if c.burst/c.rate > 31622400*0.999999 && errors.Is(err, engine.ErrInvalidConfig) {
				continue // the random case rounded past the engine's fill bound
			}
			t.Fatalf("rate %v burst %v: %v", c.rate, c.burst, err)
		}
		u := s.u
		// muldiv needs p, q < 2^52; every quotient the scripts form is at
		// most a whole fill's refill (capacity plus a quantum) or the fill
		// time in microseconds, both far below 2^53.
		if u.p > maxPQ || u.q > maxPQ || u.p == 0 || u.fill >= maxExact/2 {
			t.Fatalf("rate %v burst %v: units %+v out of bounds", c.rate, c.burst, u)
		}
		exact := new(big.Rat).Quo(new(big.Rat).SetFloat64(c.rate), big.NewRat(1000, 1))
		frac := big.NewRat(int64(u.p), int64(u.q))
		if frac.Cmp(exact) > 0 {
			t.Fatalf("rate %v: fraction %d/%d is above the rate", c.rate, u.p, u.q)
		}
		rel, _ := new(big.Rat).Quo(new(big.Rat).Sub(exact, frac), exact).Float64()
		worst = max(worst, rel)
		if u.exact != (rel == 0) {
			t.Fatalf("rate %v: exact %v but relative error %v", c.rate, u.exact, rel)
		}
	}
	if worst > 1e-15 {
		t.Fatalf("worst relative rate error %v", worst)
	}
	t.Logf("worst relative rate error over %d configurations: %.3g", len(cases), worst)
}
