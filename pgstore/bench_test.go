package pgstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// BenchmarkTake is one caller's check against a local server, next to the
// round trip it cannot avoid (SELECT 1 on the same pool): what the function
// itself costs. The peers and the Redis store are compared in the bench
// module (BenchmarkPostgres).
func BenchmarkTake(b *testing.B) {
	db := newDB(b, Schema{})
	ctx := context.Background()
	b.Run("op=select1", func(b *testing.B) {
		var n int
		for b.Loop() {
			if err := db.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tc := range []struct {
		name  string
		limit float64
		n     float64
	}{
		{"op=allow", 1e9, 1},  // always refilled: every take writes
		{"op=deny", 0.001, 2}, // never passes: reads only
		{"op=peek", 1, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := New(db, Config{Limit: 1e9, Burst: 1, Prefix: uniquePrefix(), Timeout: testTimeout})
			if tc.limit < 1e9 {
				l, err = New(db, Config{Limit: 0.001, Burst: 1, Prefix: uniquePrefix(), Timeout: testTimeout})
			}
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Take(ctx, "k", 1); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := l.Take(ctx, "k", tc.n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTakeAll is one caller's TakeAll of two limits on one key (one
// statement): two token buckets, and a token bucket with a calendar quota
// or a strict window, as a rule with both limits makes it. Names split for benchstat:
// limits=....
func BenchmarkTakeAll(b *testing.B) {
	db := newDB(b, Schema{})
	store, err := NewStore(db, StoreOptions{Prefix: uniquePrefix(), Timeout: testTimeout, SweepEvery: -1, Heartbeat: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	bind := func(spec engine.Spec) engine.Limiter {
		l, err := store.Bind(spec)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	bucket := bind(engine.Spec{ID: "a", Name: "a", Limit: 1e9, Burst: 1e6})
	other := bind(engine.Spec{ID: "b", Name: "b", Limit: 1e9, Burst: 1e6})
	quota := bind(engine.QuotaSpec("q", "q", 1e9, engine.Calendar{Period: engine.Yearly}))
	window := bind(engine.WindowSpec("w", "w", 4e6, time.Hour, 0))
	for _, bc := range []struct {
		name   string
		second engine.Limiter
	}{{"buckets", other}, {"bucket+quota", quota}, {"bucket+window", window}} {
		b.Run("limits="+bc.name, func(b *testing.B) {
			takes := []engine.Take{{Limiter: bucket, N: 0.001}, {Limiter: bc.second, N: 0.001}}
			out := make([]engine.Decision, 2)
			i := 0
			for b.Loop() {
				key := "k" + strconv.Itoa(i%1024)
				takes[0].Key, takes[1].Key = key, key
				if k, err := bucket.TakeAll(context.Background(), takes, out); err != nil || k >= 0 {
					b.Fatalf("denied %d, %v", k, err)
				}
				i++
			}
		})
	}
}
