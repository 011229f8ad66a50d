package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// Two limiters with different limits on one server, both with the default
// Prefix, keep separate buckets for the same key: neither reads the other's
// state (which once failed as a malformed reply and was answered by the
// failure policy, admitting), and each decides by its own limit.
func TestDifferentLimitsNeverShareBuckets(t *testing.T) {
	srv := redistest.Start(t)
	c := newRue(t, srv.Addr())
	big, err := New(c, Config{Limit: 1.0 / 86400, Burst: 100, Timeout: 10 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	small, err := New(c, Config{Limit: 1.0 / 86400, Burst: 5, Timeout: 10 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	same, err := New(c, Config{Limit: 1.0 / 86400, Burst: 5, Timeout: 10 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := big.Take(ctx, "k", 90); err != nil || !d.Allowed || d.Remaining != 10 {
		t.Fatalf("big.Take(90) = %+v, %v; want allowed, 10 left", d, err)
	}
	for i := range 5 {
		if d, err := small.Take(ctx, "k", 1); err != nil || !d.Allowed || d.Remaining != float64(4-i) {
			t.Fatalf("small take %d = %+v, %v; want allowed from a full bucket of 5", i, d, err)
		}
	}
	if d, err := small.Take(ctx, "k", 1); err != nil || d.Allowed {
		t.Fatalf("sixth small take = %+v, %v; want denied", d, err)
	}
	if d, err := big.Take(ctx, "k", 0); err != nil || d.Remaining != 10 {
		t.Errorf("big's bucket after small's takes = %+v, %v; want 10 left", d, err)
	}
	// A limiter with the same limit and Prefix shares the bucket, as
	// documented.
	if d, err := same.Take(ctx, "k", 0); err != nil || d.Remaining != 0 {
		t.Errorf("same limit, same Prefix: %+v, %v; want small's drained bucket", d, err)
	}
	if big.KeyFor("k") == small.KeyFor("k") || small.KeyFor("k") != same.KeyFor("k") {
		t.Errorf("keys: big %q, small %q, same %q", big.KeyFor("k"), small.KeyFor("k"), same.KeyFor("k"))
	}
}

// Keys with and without a hash tag, keys that spell another's wrapped form,
// and a long key's digest are distinct buckets.
func TestKeyFormsCannotCollide(t *testing.T) {
	srv := redistest.Start(t)
	l, err := New(newRue(t, srv.Addr()), Config{Limit: 1.0 / 86400, Burst: 1, Timeout: 10 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("L", engine.MaxKeyBytes+1)
	keys := []string{"a", "{a}", "a}", "{a}}", "={a}", "", "{}", long, engine.BoundedKey(long), "\xff"}
	seen := map[string]string{}
	for _, k := range keys {
		rk := l.KeyFor(k)
		if prev, dup := seen[rk]; dup {
			t.Errorf("KeyFor(%q) = KeyFor(%q) = %q", k, prev, rk)
		}
		seen[rk] = k
	}
	ctx := context.Background()
	for _, k := range keys {
		if d, err := l.Take(ctx, k, 1); err != nil || !d.Allowed {
			t.Errorf("first take of %q = %+v, %v; want a full bucket of its own", k, d, err)
		}
	}
	for _, k := range keys {
		if d, err := l.Take(ctx, k, 1); err != nil || d.Allowed {
			t.Errorf("second take of %q = %+v, %v; want denied", k, d, err)
		}
	}
}

// Megabyte keys cost Redis what short keys cost: 300 of them must not add
// 300 MB to the server, through a Limiter or through a Store's.
func TestLongKeysAreBounded(t *testing.T) {
	srv := redistest.Start(t)
	c := newRue(t, srv.Addr())
	l, err := New(c, Config{Limit: 1.0 / 86400, Burst: 2, Timeout: 10 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	// No heartbeat: its key would count in DBSIZE.
	hs := hsStore(t, srv.Addr(), StoreOptions{Timeout: 10 * time.Second, Heartbeat: -1})
	h, err := hs.Bind(engine.Spec{ID: "long#0000000000000001", Name: "long", Limit: 1.0 / 86400, Burst: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Release(h)
	used := func() int64 {
		var n int64
		info := admin(t, srv.Addr(), "INFO", "memory").(string)
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				fmt.Sscan(v, &n)
			}
		}
		return n
	}
	ctx := context.Background()
	before := used()
	const n = 300
	buf := []byte(strings.Repeat("v", 1<<20))
	out := make([]engine.Decision, 1)
	for i := range n {
		copy(buf, fmt.Sprintf("{%07d}", i)) // a hash tag too, which a digest drops
		key := string(buf)
		if d, err := l.Take(ctx, key, 1); err != nil || !d.Allowed {
			t.Fatalf("Limiter key %d: %+v, %v", i, d, err)
		}
		if denied, err := h.TakeAll(ctx, []engine.Take{{Limiter: h, Key: key, N: 1}}, out); err != nil || denied != -1 {
			t.Fatalf("Store key %d: denied %d, %v", i, denied, err)
		}
	}
	if keys := admin(t, srv.Addr(), "DBSIZE").(int64); keys != 2*n {
		t.Errorf("DBSIZE %d, want %d", keys, 2*n)
	}
	if grown := used() - before; grown > 2*n*1024 {
		t.Errorf("Redis used_memory grew by %d bytes for %d keys of 1 MiB: keys are stored whole", grown, 2*n)
	}
	// Each long key is still its own bucket.
	copy(buf, fmt.Sprintf("{%07d}", 3))
	if d, err := l.Take(ctx, string(buf), 2); err != nil || d.Allowed || d.Remaining < 1 || d.Remaining > 1.01 {
		t.Errorf("key 3 again: %+v, %v; want its own bucket with 1 token left", d, err)
	}
}
