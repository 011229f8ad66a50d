package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

var sink engine.Decision

// The hot path allocates nothing on an existing key: allowed, denied, peek,
// invalid cost, and observation.
func TestHotPathAllocatesNothing(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1000, Burst: 1e6})
	d := newEngine(t, engine.Config{Limit: 1, Burst: 1})
	e.Allow("hot")
	d.Allow("drained")
	now := time.Now()
	var l engine.Limiter = e
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		fn   func()
	}{
		{"Allow", func() { e.Allow("hot") }},
		{"AllowN", func() { sink = e.AllowN("hot", 2.5) }},
		{"AllowAt", func() { sink = e.AllowAt(now, "hot", 1) }},
		{"AllowAt/denied", func() { sink = d.AllowAt(now, "drained", 1) }},
		{"AllowN/peek", func() { sink = e.AllowN("hot", 0) }},
		{"AllowN/never", func() { sink = e.AllowN("hot", 2e6) }},
		{"TokensAt", func() { _ = e.TokensAt(now, "hot") }},
		{"Limiter.Take", func() { sink, _ = l.Take(ctx, "hot", 1) }},
	} {
		if n := testing.AllocsPerRun(1000, tt.fn); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", tt.name, n)
		}
	}
}
