package redisstore

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// TestWaitIsTheFirstRefillInstant checks units.wait against big-integer
// arithmetic of its definition, and its meaning on the refill grid
// G(t) = floor(t*p/q): the wait's whole microseconds are the first at which
// G has added need-have quanta since at.
func TestWaitIsTheFirstRefillInstant(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rates := []float64{1.0 / 86400, 0.1, 2.5, 10, 123.456, 1000, 1 + 1.0/(1<<30), 700 + 1.0/(1<<20), 1e6, 1e9}
	bursts := []float64{1, 1.5, 100.5, 268435, 1e6, 1e9}
	grid := func(u units, t *big.Int) *big.Int {
		g := new(big.Int).Mul(t, new(big.Int).SetUint64(u.p))
		return g.Quo(g, new(big.Int).SetUint64(u.q))
	}
	checked := 0
	for _, r := range rates {
		for _, b := range bursts {
			st, _, err := Config{Limit: engine.Limit(r), Burst: b}.validate()
			if err != nil {
				continue // outside the store's domain (covered by TestBadConfig)
			}
			u := st.u
			for range 200 {
				now := int64(1_795_000_000_000_000 + rng.Int64N(1e12))
				at := now + rng.Int64N(3)*rng.Int64N(1e6)
				need := 1 + rng.Uint64N(u.capacity)
				have := rng.Uint64N(need)
				got := u.wait(at, have, need, now)

				// Definition: (need-have)*q - phase(at) units of 1/q
				// quanta at p per microsecond, rounded up to the ns.
				P, Q := new(big.Int).SetUint64(u.p), new(big.Int).SetUint64(u.q)
				ph := new(big.Int).Mul(big.NewInt(at), P)
				ph.Mod(ph, Q)
				units := new(big.Int).Mul(new(big.Int).SetUint64(need-have), Q)
				units.Sub(units, ph)
				ns := new(big.Int).Mul(units, big.NewInt(1000))
				ns.Add(ns, new(big.Int).Sub(P, big.NewInt(1)))
				ns.Quo(ns, P)
				want := time.Duration(at-now)*time.Microsecond + time.Duration(ns.Int64())
				if got != want {
					t.Fatalf("rate %v burst %v: wait(at %d, have %d, need %d, now %d) = %v, want %v", r, b, at, have, need, now, got, want)
				}

				// Meaning: the first whole microsecond k after at with
				// G(at+k) - G(at) >= need-have.
				k := (got - time.Duration(at-now)*time.Microsecond + time.Microsecond - 1) / time.Microsecond
				A := big.NewInt(at)
				g0 := grid(u, A)
				gain := func(k int64) uint64 {
					return new(big.Int).Sub(grid(u, new(big.Int).Add(A, big.NewInt(k))), g0).Uint64()
				}
				if gain(int64(k)) < need-have || (k > 0 && gain(int64(k)-1) >= need-have) {
					t.Fatalf("rate %v burst %v: %v from at is not the first microsecond with %d quanta refilled", r, b, k, need-have)
				}
				checked++
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d cases in the domain", checked)
	}
	var u units
	if u.wait(5, 10, 10, 5) != 0 || u.wait(5, 11, 10, 5) != 0 {
		t.Fatal("a bucket holding the count waits")
	}
}
