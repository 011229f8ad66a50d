package pgstore

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Every bad field is an error that wraps ErrInvalidConfig and names it.
func TestBadConfig(t *testing.T) {
	ok := Config{Limit: 10, Burst: 5}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Limit", func(c *Config) { c.Limit = -1 }},
		{"Limit", func(c *Config) { c.Limit = engine.Limit(math.NaN()) }},
		{"Burst", func(c *Config) { c.Burst = 0 }},
		{"Table", func(c *Config) { c.Table = "1table" }},
		{"Table", func(c *Config) { c.Table = strings.Repeat("t", 49) }},
		{"Prefix", func(c *Config) { c.Prefix = strings.Repeat("p", 257) }},
		{"Timeout", func(c *Config) { c.Timeout = -time.Second }},
		{"BreakFor", func(c *Config) { c.BreakFor = -time.Second }},
		{"FallbackShare", func(c *Config) { c.FallbackShare = 0.5 }},
		{"FallbackMaxKeys", func(c *Config) { c.FallbackMaxKeys = 10 }},
		{"FallbackShare", func(c *Config) { c.OnFailure = Fallback }},
		{"FallbackShare", func(c *Config) { c.OnFailure, c.FallbackShare = Fallback, 0.1 }},
		{"OnFailure", func(c *Config) { c.OnFailure = 7 }},
	} {
		c := ok
		tc.edit(&c)
		err := c.Check()
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want an ErrInvalidConfig naming %s", c, err, tc.field)
		}
		if _, nerr := New(nopDB{}, c); nerr == nil || nerr.Error() != err.Error() {
			t.Errorf("%+v: New says %v, Check %v", c, nerr, err)
		}
	}
	if err := (Config{Limit: -1, Burst: 5}).Check(); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("a bad Limit: %v, want it to wrap engine.ErrInvalidConfig too", err)
	}
	if _, err := New(nil, ok); err == nil || !strings.Contains(err.Error(), "db") {
		t.Errorf("nil db: %v", err)
	}
	var nilPool *nopDB
	if _, err := New(nilPool, ok); err == nil {
		t.Error("a nil *pgxpool.Pool-like pointer was accepted")
	}
	if err := (StoreOptions{SweepBatch: -1}).Check(); err == nil || !strings.Contains(err.Error(), "Batch") {
		t.Errorf("StoreOptions with a bad SweepBatch: %v", err)
	}
}
