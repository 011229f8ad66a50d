package redisstore

import (
	"testing"
	"time"

	"github.com/faucetgo/faucet/redisstore/redistest"
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

// Stores on one Redis and prefix count each other through their
// heartbeats, stop counting one that closed once its window has passed,
// and while Redis is away each falls back to 1/N of a rule's burst: two
// instances of burst 8 admit 4 each, 8 in all, not 16.
func TestStoreHeartbeatSharesTheFallback(t *testing.T) {
	srv := redistest.Start(t)
	opts := StoreOptions{Prefix: "hb:", Timeout: 200 * time.Millisecond, Heartbeat: 20 * time.Millisecond}
	a := hsStore(t, srv.Addr(), opts)
	b := hsStore(t, srv.Addr(), opts)
	other := hsStore(t, srv.Addr(), StoreOptions{Prefix: "elsewhere:", Heartbeat: 20 * time.Millisecond})
	c := hsStore(t, srv.Addr(), opts)
	waitPeers(t, a, 3)
	waitPeers(t, other, 1)
	c.Close()
	waitPeers(t, a, 2)
	waitPeers(t, b, 2)
	if !a.Peers().Known() {
		t.Error("Known is false after heartbeats")
	}
	la := hsLimiter(t, a, hsPerIP(0.001, 8))
	lb := hsLimiter(t, b, hsPerIP(0.001, 8))
	srv.Kill()
	admitted := 0
	for range 10 {
		if res := hsCheck(la, "198.51.100.7"); res.Allowed {
			admitted++
		} else if res.Status != 429 || !res.StoreError {
			t.Fatalf("store down: %+v, want a fallback 429", res)
		}
		if res := hsCheck(lb, "198.51.100.7"); res.Allowed {
			admitted++
		}
	}
	if admitted != 8 {
		t.Errorf("two instances falling back admitted %d, want 8 (4 each: 1/2 of burst 8)", admitted)
	}
	// The count stays what it was while Redis is away.
	time.Sleep(150 * time.Millisecond)
	if a.Peers().N() != 2 {
		t.Errorf("with Redis away the count became %d, want the last one, 2", a.Peers().N())
	}
}
