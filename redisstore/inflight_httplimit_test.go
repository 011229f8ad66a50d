package redisstore

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// inFlightRule admits at most max requests per client address at once.
func inFlightRule(max int, failMode string) httplimit.Rule {
	return httplimit.Rule{Name: "running", LimitKeys: []string{"ip:address"}, MaxInFlight: max, FailMode: failMode}
}

func admitFrom(l *httplimit.Middleware, ip string) (httplimit.Result, func()) {
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	r.RemoteAddr = ip + ":1234"
	return l.Admit(r)
}

// Two instances, each with its own store and client, share one Redis:
// together they never have more than max requests of a key in flight,
// from 24 goroutines racing on both, and a slot comes back when its
// request ends.
func TestInFlightAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	const max = 3
	ls := []*httplimit.Middleware{
		hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{}), inFlightRule(max, "")),
		hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{}), inFlightRule(max, "")),
	}
	var inside, most, admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			for range 20 {
				res, done := admitFrom(ls[i%2], "198.51.100.7")
				if res.Allowed {
					admitted.Add(1)
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
				} else if res.Reason != httplimit.ReasonInFlightExceeded {
					t.Errorf("denied for %q, want %s", res.Reason, httplimit.ReasonInFlightExceeded)
				}
				done()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > max || admitted.Load() < max {
		t.Errorf("%d in flight at once across the instances, %d admitted; want at most %d, and at least %d admitted", m, admitted.Load(), max, max)
	}
	// The releases run in the background: soon every slot is free.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var dones []func()
		ok := 0
		for i := range max {
			res, done := admitFrom(ls[i%2], "198.51.100.7")
			dones = append(dones, done)
			if res.Allowed {
				ok++
			}
		}
		for _, d := range dones {
			d()
		}
		if ok == max {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d admitted at once after every request ended, want all", ok, max)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A slot held longer than the store's TTL stays held: the instance renews
// it. One whose instance stops renewing it (closed) frees after the TTL.
func TestInFlightSlotsRenewed(t *testing.T) {
	srv := redistest.Start(t)
	a := hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{SlotTTL: time.Second}), inFlightRule(1, ""))
	b := hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{SlotTTL: time.Second}), inFlightRule(1, ""))
	res, done := admitFrom(a, "198.51.100.9")
	if !res.Allowed {
		t.Fatalf("first request: %+v", res)
	}
	time.Sleep(3 * time.Second)
	if res, d := admitFrom(b, "198.51.100.9"); res.Allowed {
		d()
		t.Fatal("the other instance got a slot 3 s into a request with a TTL of 1 s: the slot was not renewed")
	}
	done()
	a.Close() // stops renewing; nothing else is held
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, d := admitFrom(b, "198.51.100.9")
		d()
		if res.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slot never came back after its request ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// While Redis is down, fail_mode fallback keeps each instance to its share
// of the limit (the limit over the instances its heartbeats counted, at
// least 1), and closed answers 503: neither lifts the limit.
func TestInFlightStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	fbStore := hsStore(t, srv.Addr(), StoreOptions{})
	fb := hsLimiter(t, fbStore, inFlightRule(2, "fallback"))
	closed := hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{}), httplimit.Rule{Name: "running-closed", LimitKeys: []string{"ip:address"}, MaxInFlight: 2, FailMode: "closed"})
	srv.Kill()
	var dones []func()
	defer func() {
		for _, d := range dones {
			d()
		}
	}()
	admitted := 0
	for range 5 {
		res, d := admitFrom(fb, "198.51.100.10")
		dones = append(dones, d)
		if res.Allowed {
			admitted++
			if !res.StoreError || !res.Policies[0].Fallback {
				t.Errorf("admitted during the outage: %+v, want a fallback decision", res)
			}
		}
	}
	if want := max(1, 2/fbStore.Peers().N()); admitted != want {
		t.Errorf("fallback admitted %d of 5 at once with Redis down, want %d (2 over %d instances)", admitted, want, fbStore.Peers().N())
	}
	res, d := admitFrom(closed, "198.51.100.10")
	d()
	if res.Allowed || res.Status != http.StatusServiceUnavailable {
		t.Errorf("fail_mode closed with Redis down: %+v, want 503", res)
	}
}
