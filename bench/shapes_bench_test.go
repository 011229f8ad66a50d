package bench

import (
	"context"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// BenchmarkShapes times one check of an existing key in each shape of
// limit, beside the token bucket, at the wall clock as a server checks:
// shape=token_bucket is Engine.Take; shape=calendar_quota is Quota.Take (a
// monthly quota in a zone with daylight saving, the key inside its
// period); shape=strict_window is Window.Take (a day in 24 slots, each
// take of the smallest cost, so that no run fills it);
// shape=bucket+quota is one Engine.TakeAll of a token bucket and a quota
// on the key (a rule with both limits); shape=bucket+bucket the same with
// two token buckets (a Multi of two parts). Every call is admitted: the
// limits are far above what a run takes.
func BenchmarkShapes(b *testing.B) {
	const key = "key:000000001"
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	bucket := func() *engine.Engine {
		e, err := engine.New(engine.Config{Limit: 1e9, Burst: 1e9})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		return e
	}
	quota := func() *engine.Quota {
		q, err := engine.NewQuota(engine.QuotaConfig{Quota: 1e9,
			Calendar: engine.Calendar{Period: engine.Monthly, Day: 15, Location: berlin}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { q.Close() })
		return q
	}
	window := func() *engine.Window {
		w, err := engine.NewWindow(engine.WindowConfig{Limit: 4e6, Window: 24 * time.Hour, Slots: 24})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { w.Close() })
		return w
	}
	check := func(b *testing.B, l engine.Limiter, cost float64) {
		b.ReportAllocs()
		for b.Loop() {
			if d, _ := l.Take(ctx, key, cost); !d.Allowed {
				b.Fatal("denied")
			}
		}
	}
	takeAll := func(b *testing.B, takes []engine.Take) {
		out := make([]engine.Decision, len(takes))
		b.ReportAllocs()
		for b.Loop() {
			if k, _ := takes[0].Limiter.TakeAll(ctx, takes, out); k >= 0 {
				b.Fatal("denied")
			}
		}
	}
	b.Run("shape=token_bucket", func(b *testing.B) { check(b, bucket(), 1) })
	b.Run("shape=calendar_quota", func(b *testing.B) { check(b, quota(), 1) })
	// A window's limit is at most 4e6: the smallest cost keeps a run
	// of billions of calls admitted.
	b.Run("shape=strict_window", func(b *testing.B) { check(b, window(), 0.001) })
	b.Run("shape=bucket+bucket", func(b *testing.B) {
		takeAll(b, []engine.Take{{Limiter: bucket(), Key: key, N: 1}, {Limiter: bucket(), Key: key, N: 1}})
	})
	b.Run("shape=bucket+quota", func(b *testing.B) {
		takeAll(b, []engine.Take{{Limiter: bucket(), Key: key, N: 1}, {Limiter: quota(), Key: key, N: 1}})
	})
}
