package pgstore

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// Two instances, each a Store on a pool of its own, share one database:
// an in-flight limit of 3 holds across both under 16 goroutines, slots
// held past the TTL are renewed, and every slot comes back when its
// request ends.
func TestInFlightAcrossInstances(t *testing.T) {
	db := newDB(t, Schema{})
	dsn := db.Config().ConnString()
	const max = 3
	rule := httplimit.Rule{Name: "running", LimitKeys: []string{"ip:address"}, MaxInFlight: max}
	var ls []*httplimit.Middleware
	for range 2 {
		st := slotStore(t, poolOn(t, dsn, Schema{}), StoreOptions{SlotTTL: time.Second})
		l, err := httplimit.New([]httplimit.Rule{rule}, httplimit.Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
	}
	admit := func(l *httplimit.Middleware) (httplimit.Result, func()) {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.RemoteAddr = "198.51.100.7:1234"
		return l.Admit(r)
	}
	var inside, most, admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for range 10 {
				res, done := admit(ls[i%2])
				if res.Allowed {
					admitted.Add(1)
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(2 * time.Millisecond)
					inside.Add(-1)
				} else if res.Reason != httplimit.ReasonInFlightExceeded {
					t.Errorf("denied for %q (%+v), want %s", res.Reason, res, httplimit.ReasonInFlightExceeded)
				}
				done()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > max || admitted.Load() < max {
		t.Errorf("%d in flight at once across the instances, %d admitted; want at most %d, at least %d admitted", m, admitted.Load(), max, max)
	}

	// Held 3 s with a TTL of 1 s: renewed, so the other instance is denied.
	var dones []func()
	for i := range max {
		deadline := time.Now().Add(5 * time.Second)
		for {
			res, done := admit(ls[i%2])
			if res.Allowed {
				dones = append(dones, done)
				break
			}
			done()
			if time.Now().After(deadline) {
				t.Fatalf("slot %d never came back after every request ended", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(3 * time.Second)
	if res, done := admit(ls[1]); res.Allowed {
		done()
		t.Errorf("a fourth request was admitted 3 s into three held ones, TTL 1 s: the slots were not renewed")
	}
	for _, d := range dones {
		d()
	}
}
