package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

// Redis Cluster: three masters on loopback. Every bucket's key carries a hash
// tag, so each script's keys lie in one slot; keys that share a caller's tag
// share a slot, and a TakeAll over them is one atomic script.
func TestCluster(t *testing.T) {
	nodes := redistest.StartCluster(t)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	rue := newRue(t, addrs...)
	gor := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { gor.Close() })
	cfg := Config{Limit: 1.0 / 3600, Burst: 50, Timeout: 10 * time.Second, OnFailure: FailClosed}
	lr, err := New(rue, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := NewGoRedis(gor, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if lr.batches || lg.batches {
		t.Fatal("cluster clients batch checks whose keys may not share a slot")
	}

	t.Run("exact admission on keys across slots", func(t *testing.T) {
		keys := make([]string, 12)
		slots := map[int]bool{}
		for i := range keys {
			keys[i] = fmt.Sprintf("user%d", i)
			slots[slotOf(lr.KeyFor(keys[i]))] = true
		}
		if len(slots) < 6 {
			t.Fatalf("keys fall in only %d slots", len(slots))
		}
		var allowed [12]atomic.Int64
		var failed atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			l := lr
			if g%2 == 1 {
				l = lg
			}
			wg.Go(func() {
				for i := range 60 * len(keys) {
					k := (i + g) % len(keys)
					d, err := l.Take(context.Background(), keys[k], 1)
					if err != nil {
						failed.Add(1)
						return
					}
					if d.Allowed {
						allowed[k].Add(1)
					}
				}
			})
		}
		wg.Wait()
		if failed.Load() != 0 {
			t.Fatalf("%d calls failed", failed.Load())
		}
		for i := range allowed {
			if got := allowed[i].Load(); got != 50 {
				t.Fatalf("key %s admitted %d, want exactly 50", keys[i], got)
			}
		}
	})

	t.Run("one slot: TakeAll is one atomic script", func(t *testing.T) {
		tenant, err := New(rue, Config{Limit: 1.0 / 3600, Burst: 3, Prefix: "tenant:", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		takes := []engine.Take{{Limiter: lr, Key: "{t1}:alice", N: 1}, {Limiter: tenant, Key: "{t1}", N: 1}}
		if slotOf(lr.KeyFor(takes[0].Key)) != slotOf(tenant.KeyFor(takes[1].Key)) {
			t.Fatal("tagged keys in different slots")
		}
		out := make([]engine.Decision, 2)
		for i := range 3 {
			if k, err := lr.TakeAll(context.Background(), takes, out); k != -1 || err != nil || !out[0].Allowed || !out[1].Allowed {
				t.Fatalf("take %d: denied %d, %v, %+v", i, k, err, out)
			}
		}
		k, err := lr.TakeAll(context.Background(), takes, out)
		if k != 1 || err != nil || out[0].Allowed || out[1].Allowed || out[1].RetryAfter <= 0 {
			t.Fatalf("4th take: denied %d, %v, %+v; want the tenant (1) denied", k, err, out)
		}
		if left, _ := lr.Tokens(context.Background(), "{t1}:alice"); left != 47 {
			t.Fatalf("user bucket holds %v, want 47: the denied call took nothing", left)
		}
	})

	t.Run("across slots: in order, given back on denial", func(t *testing.T) {
		small, err := New(rue, Config{Limit: 1.0 / 3600, Burst: 1, Prefix: "small:", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		takes := []engine.Take{{Limiter: lr, Key: "bob", N: 5}, {Limiter: small, Key: "carol", N: 1}}
		if slotOf(lr.KeyFor("bob")) == slotOf(small.KeyFor("carol")) {
			t.Fatal("keys share a slot; pick others")
		}
		out := make([]engine.Decision, 2)
		if k, err := lr.TakeAll(context.Background(), takes, out); k != -1 || err != nil {
			t.Fatalf("first call: denied %d, %v", k, err)
		}
		k, err := lr.TakeAll(context.Background(), takes, out)
		if k != 1 || err != nil || out[0].Allowed || out[0].Remaining != 45 {
			t.Fatalf("second call: denied %d, %v, %+v; want 1 denied and bob's 5 given back (45 left)", k, err, out)
		}
		if left, _ := lr.Tokens(context.Background(), "bob"); left != 45 {
			t.Fatalf("bob holds %v, want 45", left)
		}
	})
}
