package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// BenchmarkTake measures one decision against a local redis-server through
// each client, with a given number of concurrent callers, each on its own
// keys (1024 keys in all, so that the server, not one hot key, is measured).
// Names split for benchstat: client=..., callers=....
func BenchmarkTake(b *testing.B) {
	s := redistest.Start(b)
	for _, client := range []string{"rueidis", "go-redis"} {
		var l *Limiter
		var err error
		cfg := Config{Limit: 1e6, Burst: 1e6, Timeout: 10 * time.Second, OnFailure: FailClosed}
		if client == "rueidis" {
			l, err = New(newRue(b, s.Addr()), cfg)
		} else {
			l, err = NewGoRedis(newGoRedis(b, s.Addr()), cfg)
		}
		if err != nil {
			b.Fatal(err)
		}
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(i)
		}
		for _, callers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("client=%s/callers=%d", client, callers), func(b *testing.B) {
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				var next, failed atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					i := int(next.Add(1)) * 61
					for pb.Next() {
						if _, err := l.Take(context.Background(), keys[i%len(keys)], 1); err != nil {
							failed.Add(1)
						}
						i++
					}
				})
				if failed.Load() != 0 {
					b.Fatalf("%d calls failed", failed.Load())
				}
			})
		}
	}
}

// BenchmarkTakeAll measures a TakeAll of two limits on one key (one
// script) through rueidis, one caller: two token buckets, and a token
// bucket with a calendar quota or a strict window, as a rule with both
// limits makes it.
// Names split for benchstat: limits=....
func BenchmarkTakeAll(b *testing.B) {
	s := redistest.Start(b)
	store, err := NewStore(newRue(b, s.Addr()), StoreOptions{Heartbeat: -1, Timeout: 10 * time.Second})
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
	bucket := bind(engine.Spec{ID: "a", Name: "a", Limit: 1e6, Burst: 1e6})
	other := bind(engine.Spec{ID: "b", Name: "b", Limit: 1e6, Burst: 1e6})
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
