package pgstore

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// frozen is a limit whose refill during a test is far below a token: a
// token every 1000 s.
const frozen engine.Limit = 0.001

// TestContentionExactBurst: 64 goroutines taking from one key admit
// exactly Burst, however their compare-and-swaps interleave.
func TestContentionExactBurst(t *testing.T) {
	db := newDB(t, Schema{})
	l := mustNew(t, db, Config{Limit: frozen, Burst: 100, Prefix: uniquePrefix(), Timeout: 30 * time.Second})
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 5 {
				d, err := l.Take(context.Background(), "hot", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 100 || denied.Load() != 220 {
		t.Fatalf("%d allowed, %d denied of 320 takes: want exactly the burst, 100", allowed.Load(), denied.Load())
	}
}

// TestContentionTakeAll: concurrent TakeAlls over the same keys in
// different orders never deadlock (the function locks rows in key order)
// and admit exactly what the scarcest bucket holds.
func TestContentionTakeAll(t *testing.T) {
	db := newDB(t, Schema{})
	a := mustNew(t, db, Config{Limit: frozen, Burst: 30, Prefix: uniquePrefix(), Timeout: 30 * time.Second})
	b := mustNew(t, db, Config{Limit: frozen, Burst: 50, Prefix: uniquePrefix(), Timeout: 30 * time.Second})
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 8 {
				takes := []engine.Take{{Limiter: a, Key: "x", N: 1}, {Limiter: b, Key: "y", N: 1}, {Limiter: b, Key: "z", N: 1}, {Limiter: a, Key: "w", N: 1}}
				rng.Shuffle(len(takes), func(i, j int) { takes[i], takes[j] = takes[j], takes[i] })
				out := make([]engine.Decision, len(takes))
				k, err := a.TakeAll(context.Background(), takes, out)
				if err != nil {
					t.Error(err)
					return
				}
				if k < 0 {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 30 {
		t.Fatalf("%d of 128 calls allowed: want 30, the smallest burst", allowed.Load())
	}
	for _, c := range []struct {
		l    *Limiter
		key  string
		want float64
	}{{a, "x", 0}, {a, "w", 0}, {b, "y", 20}, {b, "z", 20}} {
		if v, err := c.l.Tokens(context.Background(), c.key); err != nil || v < c.want || v > c.want+0.01 {
			t.Errorf("%s holds %v (%v), want %v: a denied call took something", c.key, v, err, c.want)
		}
	}
}

// TestKeysAreBytes: keys with NUL bytes, invalid UTF-8 and any length are
// buckets of their own.
func TestKeysAreBytes(t *testing.T) {
	db := newDB(t, Schema{})
	l := mustNew(t, db, Config{Limit: frozen, Burst: 1, Prefix: uniquePrefix(), Timeout: testTimeout})
	long := string(make([]byte, 10_000))
	keys := []string{"", "a", "a\x00", "\xff\xfe", long, long + "x", "ключ"}
	for _, k := range keys {
		if d, err := l.Take(context.Background(), k, 1); err != nil || !d.Allowed {
			t.Fatalf("%q: first take %+v %v", k[:min(len(k), 8)], d, err)
		}
	}
	for _, k := range keys {
		if d, err := l.Take(context.Background(), k, 1); err != nil || d.Allowed {
			t.Fatalf("%q: second take %+v %v: keys share a bucket", k[:min(len(k), 8)], d, err)
		}
	}
}
