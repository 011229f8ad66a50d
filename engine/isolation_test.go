package engine_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/shard"
)

// collidingKeys are pairs of distinct keys with the same 64-bit hash, found
// by a cycle-finding search over 16-hex-digit keys (about 6e9 hashes per
// pair). Equal hashes put both keys of a pair in the same shard, the same
// probe sequence and the same tag byte under any seed: only the key
// comparison keeps them apart.
var collidingKeys = [][2]string{
	{"5d74d30bbc273ade", "d6411dbbd706a8a4"},
	{"c0a95dfa51551801", "bfb6b90e7792a22d"},
	{"5387352b8962236f", "ee5cb1f1991e8745"},
}

func TestCollidingKeysCollide(t *testing.T) {
	for _, p := range collidingKeys {
		if p[0] == p[1] || shard.Hash(p[0]) != shard.Hash(p[1]) {
			t.Errorf("%q and %q do not collide: %#x, %#x", p[0], p[1], shard.Hash(p[0]), shard.Hash(p[1]))
		}
	}
}

// P15: operations on one key never change another, even when both keys share
// a shard and their full hash: takes, peeks, evictions (by a sweep and to make
// room under MaxKeys), index rebuilds while they live, and concurrent takes.
func TestCollidingKeysAreIsolated(t *testing.T) {
	for _, shards := range []int{1, 64} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			e := newEngine(t, engine.Config{Limit: 1, Burst: 10, Shards: shards})
			// Distinct levels for every colliding key: 9, 8, 7, 6, 5, 4.
			for i, p := range collidingKeys {
				e.AllowAt(t0, p[0], float64(2*i+1))
				e.AllowAt(t0, p[1], float64(2*i+2))
			}
			// Enough other keys to rebuild every index several times.
			for i := range 5000 {
				e.AllowAt(t0, fmt.Sprint("filler-", i), 1)
			}
			for i, p := range collidingKeys {
				for j, k := range p {
					if got, want := e.TokensAt(t0, k), float64(10-2*i-j-1); got != want {
						t.Errorf("%q holds %v, want %v", k, got, want)
					}
				}
			}
			// The first key of each pair refills to full at 9 s at the
			// latest; the second drains to zero at 9 s. A sweep then evicts
			// the first and keeps the second.
			for _, p := range collidingKeys {
				e.AllowAt(at(9*time.Second), p[1], 10)
			}
			before := e.Len()
			e.SweepAt(at(9 * time.Second))
			for _, p := range collidingKeys {
				if d := e.AllowAt(at(9*time.Second), p[1], 0); d.Remaining != 0 {
					t.Errorf("after the sweep %q holds %v, want 0 (its twin was evicted)", p[1], d.Remaining)
				}
				if d := e.AllowAt(at(9*time.Second), p[0], 10); !d.Allowed {
					t.Errorf("evicted %q did not come back full: %+v", p[0], d)
				}
			}
			if e.Len() != before-5000 {
				t.Errorf("Len %d after the sweep, want %d (only the fillers left for good)", e.Len(), before-5000)
			}
		})
	}
}

// Concurrent takes on both keys of every colliding pair, at a frozen clock,
// admit exactly the burst on each key, with a sweeper racing them.
func TestCollidingKeysConcurrently(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 100, Shards: 1})
	var keys []string
	for _, p := range collidingKeys {
		keys = append(keys, p[0], p[1])
	}
	admitted := make([]atomic.Int64, len(keys))
	stopSweeping := sweepUntilStopped(e, t0)
	var takers sync.WaitGroup
	for g := range 4 {
		takers.Go(func() {
			for i := range 400 * len(keys) {
				k := (i + g) % len(keys)
				if e.AllowAt(t0, keys[k], 1).Allowed {
					admitted[k].Add(1)
				}
			}
		})
	}
	takers.Wait()
	stopSweeping()
	for i, k := range keys {
		if got := admitted[i].Load(); got != 100 {
			t.Errorf("%q: admitted %d, want exactly the burst 100", k, got)
		}
	}
}

// MaxKeys eviction picks a full bucket, never its colliding twin.
func TestCollidingKeysUnderMaxKeys(t *testing.T) {
	p := collidingKeys[0]
	e := newEngine(t, engine.Config{Limit: 1, Burst: 2, Shards: 1, MaxKeys: 2})
	e.AllowAt(t0, p[0], 1) // full again at 1 s
	e.AllowAt(t0, p[1], 2) // full again at 2 s
	if d := e.AllowAt(at(time.Second), "third", 1); !d.Allowed || e.Stats().Evicted != 1 || e.Stats().Overflow != 0 {
		t.Fatalf("new key at MaxKeys: %+v, %+v; want one eviction", d, e.Stats())
	}
	if got := e.TokensAt(at(time.Second), p[1]); got != 1 {
		t.Errorf("%q holds %v after its twin's eviction, want 1", p[1], got)
	}
}
