package redisstore

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

func leaseLimiter(t *testing.T, addr string, limit engine.Limit, burst float64) *Limiter {
	t.Helper()
	l, err := newLimiter(rueClient{newRue(t, addr)}, Config{Limit: limit, Burst: burst, Timeout: 10 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// checkBucket fails unless the bucket's tokens and its leases' quanta fit
// in the capacity: what keeps leases from minting tokens.
func checkBucket(t *testing.T, l *Limiter, what string, g grant) {
	t.Helper()
	if g.tokens+g.out > l.s.u.capacity {
		t.Fatalf("%s: bucket %d + leased %d quanta > capacity %d", what, g.tokens, g.out, l.s.u.capacity)
	}
}

// A lease takes the bucket's tokens, and the bucket refills only up to the
// capacity less what leases hold: a lease of the whole burst, held while a
// bucket alone would refill several times, leaves nothing to grant. Released,
// its unspent tokens return.
func TestLeaseRefillStopsAtCapacityLessLeased(t *testing.T) {
	srv := redistest.Start(t)
	l := leaseLimiter(t, srv.Addr(), 1000, 10) // full again 10 ms after empty
	ctx := context.Background()
	g, err := l.lease(ctx, "k", 10_000, 1, time.Second, "a", "", 0)
	if err != nil || g.quanta != 10_000 || g.out != 10_000 || g.tokens != 0 {
		t.Fatalf("lease of the whole burst: %+v, %v", g, err)
	}
	time.Sleep(50 * time.Millisecond)
	if g, err = l.lease(ctx, "k", 1000, 1, time.Second, "b", "", 0); err != nil || g.quanta != 0 || g.tokens != 0 || g.out != 10_000 {
		t.Fatalf("a lease 50 ms later, with the burst leased: %+v, %v; want nothing granted", g, err)
	}
	ok, g, err := l.release(ctx, "k", "a", 4000)
	if err != nil || !ok || g.out != 0 || g.tokens != 4000 {
		t.Fatalf("release with 4 tokens unspent: %v %+v %v; want them back in the bucket", ok, g, err)
	}
	checkBucket(t, l, "after the release", g)
	if ok, _, err := l.release(ctx, "k", "a", 4000); ok || err != nil {
		t.Errorf("a second release of one lease: %v, %v; want nothing", ok, err)
	}
}

// An expired lease's unspent tokens are forfeited, not returned: the
// instance stopped spending them at its own deadline, which comes first.
func TestLeaseExpiryForfeits(t *testing.T) {
	srv := redistest.Start(t)
	l := leaseLimiter(t, srv.Addr(), 0.001, 10)
	ctx := context.Background()
	if g, err := l.lease(ctx, "k", 10_000, 1, 20*time.Millisecond, "a", "", 0); err != nil || g.quanta != 10_000 {
		t.Fatalf("lease: %+v, %v", g, err)
	}
	time.Sleep(60 * time.Millisecond)
	g, err := l.lease(ctx, "k", 0, 0, time.Second, "report", "", 0)
	if err != nil || g.out != 0 || g.tokens != 0 {
		t.Fatalf("after the lease expired: %+v, %v; want nothing leased and nothing back", g, err)
	}
	if ok, g, err := l.release(ctx, "k", "a", 10_000); ok || err != nil || g.tokens != 0 {
		t.Errorf("release of an expired lease: %v %+v %v; want nothing given back", ok, g, err)
	}
}

// Random leases, releases and expiries from several instances never let
// the bucket and the leases hold more than the capacity, and over any span
// the quanta granted less those given back are at most the capacity plus
// the refill of the span.
func TestLeasesNeverMintTokens(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		limit engine.Limit
		burst float64
	}{{200, 20}, {5000, 50}, {0.5, 5}} {
		t.Run(fmt.Sprintf("limit=%v/burst=%v", tc.limit, tc.burst), func(t *testing.T) {
			l := leaseLimiter(t, srv.Addr(), tc.limit, tc.burst)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(tc.limit), 7))
			type event struct {
				now int64
				net int64 // quanta granted (+) or given back (-)
			}
			var events []event
			type held struct {
				id     string
				quanta uint64
			}
			var leases []held
			capacity := l.s.u.capacity
			deadline := time.Now().Add(1500 * time.Millisecond)
			for i := 0; time.Now().Before(deadline) && i < 5000; i++ {
				switch op := rng.IntN(10); {
				case op < 6:
					want := uint64(rng.IntN(int(capacity/4))) + 1
					least := uint64(0)
					if rng.IntN(2) == 0 {
						least = want
					}
					id := fmt.Sprintf("i%d-%d", rng.IntN(4), i)
					ttl := time.Duration(5+rng.IntN(60)) * time.Millisecond
					g, err := l.lease(ctx, "k", want, least, ttl, id, "", 0)
					if err != nil {
						t.Fatal(err)
					}
					checkBucket(t, l, fmt.Sprintf("op %d lease", i), g)
					if g.quanta > want || g.quanta != 0 && g.quanta < least {
						t.Fatalf("op %d: granted %d for want %d least %d", i, g.quanta, want, least)
					}
					if g.quanta > 0 {
						leases = append(leases, held{id, g.quanta})
						events = append(events, event{g.now, int64(g.quanta)})
					}
				case op < 9 && len(leases) > 0:
					k := rng.IntN(len(leases))
					h := leases[k]
					leases = append(leases[:k], leases[k+1:]...)
					unspent := uint64(rng.IntN(int(h.quanta) + 1))
					ok, g, err := l.release(ctx, "k", h.id, unspent)
					if err != nil {
						t.Fatal(err)
					}
					checkBucket(t, l, fmt.Sprintf("op %d release", i), g)
					if ok {
						events = append(events, event{g.now, -int64(unspent)})
					}
				default:
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				}
			}
			// For every span between two events: net grants within it at
			// most the capacity plus the grid's refill of the span (one
			// quantum more for the grid's phase).
			p, q := new(big.Int).SetUint64(l.s.u.p), new(big.Int).SetUint64(l.s.u.q)
			for i := range events {
				var net int64
				for j := i; j < len(events); j++ {
					net += events[j].net
					span := new(big.Int).Mul(big.NewInt(events[j].now-events[i].now), p)
					refill := new(big.Int).Quo(span, q).Int64() + 1
					if net > int64(capacity)+refill {
						t.Fatalf("events %d..%d (%d µs): net %d quanta granted, above capacity %d + refill %d", i, j, events[j].now-events[i].now, net, capacity, refill)
					}
				}
			}
			// Once every lease has expired, nothing stays leased.
			time.Sleep(80 * time.Millisecond)
			g, err := l.lease(ctx, "k", 0, 0, time.Second, "report", "", 0)
			if err != nil || g.out != 0 {
				t.Errorf("after every lease expired: %+v, %v; want nothing leased", g, err)
			}
			checkBucket(t, l, "at the end", g)
			if len(events) < 50 {
				t.Errorf("only %d grants and releases: the test exercised too little", len(events))
			}
		})
	}
}
