package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// waitPeers waits, at most 10 s, until s counts n instances.
func waitPeers(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Peers().N() != n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.Peers().N(); got != n {
		t.Fatalf("the store counts %d instances, want %d", got, n)
	}
}

// Stores on one table and prefix count each other through their heartbeat
// rows, stop counting one that closed once its window has passed, never
// count a bucket, and while the database is away each falls back to 1/N of
// a limit: two instances of burst 8 admit 4 each, 8 in all, not 16.
func TestStoreHeartbeatSharesTheFallback(t *testing.T) {
	db := newDB(t, Schema{})
	opts := StoreOptions{Prefix: "hb:", Timeout: testTimeout, Heartbeat: 20 * time.Millisecond, SweepEvery: -1}
	open := func(db DB, opts StoreOptions) *Store {
		s, err := NewStore(db, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	// b has a pool of its own, closed below to make the database fail.
	bPool := poolOn(t, db.Config().ConnString(), Schema{})
	a, b, c := open(db, opts), open(bPool, opts), open(db, opts)
	other := open(db, StoreOptions{Prefix: "elsewhere:", Heartbeat: 20 * time.Millisecond, SweepEvery: -1})
	spec := engine.Spec{ID: "per-ip", Name: "per-ip", Limit: 0.001, Burst: 8}
	la, err := a.Bind(spec)
	if err != nil {
		t.Fatal(err)
	}
	// Buckets under the same prefix are not instances.
	for _, k := range []string{"x", " instances ", "\" instances "} {
		if d, err := la.Take(context.Background(), k, 1); err != nil || !d.Allowed {
			t.Fatalf("take: %+v, %v", d, err)
		}
	}
	waitPeers(t, a, 3)
	waitPeers(t, other, 1)
	c.Close()
	waitPeers(t, a, 2)
	waitPeers(t, b, 2)
	lb, err := b.Bind(spec)
	if err != nil {
		t.Fatal(err)
	}
	// Both instances' databases fail: a's statements time out (an ended
	// deadline), b's pool is closed.
	bPool.Close()
	admitted := 0
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		if d, err := la.Take(ctx, "198.51.100.7", 1); err == nil {
			t.Fatal("a take with an ended context succeeded")
		} else if d.Allowed {
			admitted++
		}
		if d, err := lb.Take(context.Background(), "198.51.100.7", 1); err == nil {
			t.Fatal("a take on a closed pool succeeded")
		} else if d.Allowed {
			admitted++
		}
	}
	if admitted != 8 {
		t.Errorf("two instances falling back admitted %d, want 8 (4 each: 1/2 of burst 8)", admitted)
	}
}
