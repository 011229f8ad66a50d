package engine_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// With a frozen clock, G goroutines × M calls on one key admit exactly
// floor(Burst/cost): the CompareAndSwap loop loses no update and double-spends
// no token.
func TestFrozenClockExactAdmission(t *testing.T) {
	for _, tt := range []struct {
		burst, cost float64
	}{
		{1000, 1}, {1000, 3}, {10, 0.1}, {7.5, 2.5}, {1e6, 997},
	} {
		t.Run(fmt.Sprintf("burst=%v/cost=%v", tt.burst, tt.cost), func(t *testing.T) {
			e := newEngine(t, engine.Config{Limit: 1, Burst: tt.burst})
			const goroutines, calls = 8, 2000
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range calls {
						if e.AllowAt(t0, "k", tt.cost).Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			want := int64(tt.burst*1000) / int64(tt.cost*1000)
			if got := admitted.Load(); got != want {
				t.Errorf("admitted %d, want %d", got, want)
			}
			left := tt.burst - float64(want)*tt.cost
			if got := e.TokensAt(t0, "k"); got < left-1e-9 || got > left+1e-9 {
				t.Errorf("tokens left %v, want %v", got, left)
			}
		})
	}
}

// The first takes after a long gap lie past the span of the bucket's packed
// timestamp: one of them replaces the bucket (under the shard's mutex) while
// the others race it on the old and the new. Exactly the burst is admitted,
// for a key's own bucket and for the overflow bucket of a full table.
func TestFrozenClockPastTheSpanExact(t *testing.T) {
	for _, overflow := range []bool{false, true} {
		t.Run(fmt.Sprintf("overflow=%v", overflow), func(t *testing.T) {
			cfg := engine.Config{Limit: 100, Burst: 1e6, SweepInterval: -1} // a span of 68.7 s
			if overflow {
				cfg.MaxKeys = 1
			}
			e := newEngine(t, cfg)
			e.AllowAt(t0, "k", 1e6)
			far := at(400 * 24 * time.Hour) // full again, 400 days on
			if overflow {
				e.AllowAt(t0, "other", 1e6) // drains the overflow bucket
				// Drains k again just before: not full, so not evictable,
				// and the table stays full for the overflowing keys.
				e.AllowAt(far.Add(-time.Millisecond), "k", 1e6)
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					key := "k"
					if overflow {
						key = fmt.Sprint("new", g) // every key overflows
					}
					for range 400 {
						if e.AllowAt(far, key, 1000).Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got := admitted.Load(); got != 1000 {
				t.Errorf("admitted %d takes of 1000 at one instant from a full bucket of 1e6, want 1000", got)
			}
		})
	}
}

// Mixed costs: whatever interleaving, admitted tokens never exceed the burst.
func TestFrozenClockMixedCosts(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 500})
	var admittedMilli atomic.Int64
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 3000 {
				c := 1 + rng.IntN(7000) // milli-tokens
				if e.AllowAt(t0, "k", float64(c)/1000).Allowed {
					admittedMilli.Add(int64(c))
				}
			}
		})
	}
	wg.Wait()
	left := int64(e.TokensAt(t0, "k")*1000 + 0.5)
	if got := admittedMilli.Load(); got > 500_000 || got+left != 500_000 {
		t.Errorf("admitted %d milli-tokens with %d left, want a sum of exactly 500000", got, left)
	}
}

// Goroutines that read the clock and then call late (out-of-order times)
// cannot mint tokens: admitted <= burst + rate * (max time - min time).
func TestOutOfOrderTimesBound(t *testing.T) {
	const rate, burst = 1000.0, 50.0
	e := newEngine(t, engine.Config{Limit: rate, Burst: burst})
	var clock atomic.Int64 // virtual nanoseconds, advanced by every caller
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for range 5000 {
				now := clock.Add(int64(rng.IntN(20_000)))
				if rng.IntN(3) == 0 {
					runtime.Gosched() // let others move the clock on before we call
				}
				if e.AllowAt(time.Unix(0, now), "k", 1).Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	span := float64(clock.Load()) / 1e9
	if got, bound := float64(admitted.Load()), burst+rate*span; got > bound {
		t.Errorf("admitted %v > burst + rate*span = %v", got, bound)
	}
}

// Sweeps racing takes lose nothing: the decisions of a run with a sweeper
// (SweepAt at times no later than the takes still to come) equal those of a
// run without.
func TestSweepRacingTakesIsLossless(t *testing.T) {
	const keys, ops = 64, 40000
	cfg := engine.Config{Limit: 2000, Burst: 3, Shards: 4}
	swept := newEngine(t, cfg)
	plain := newEngine(t, cfg)
	type op struct {
		key  string
		at   int64
		cost float64
	}
	rng := rand.New(rand.NewPCG(3, 4))
	script := make([]op, ops)
	var now int64
	for i := range script {
		now += int64(rng.IntN(1_000_000))
		script[i] = op{fmt.Sprint("k", rng.IntN(keys)), now, float64(1 + rng.IntN(3))}
	}
	var published atomic.Int64 // time of the last completed take
	published.Store(-1)
	stop := make(chan struct{})
	var evictions, sweeps atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if p := published.Load(); p >= 0 {
				evictions.Add(int64(swept.SweepAt(time.Unix(0, p))))
				sweeps.Add(1)
			}
			runtime.Gosched() // one sweep per turn at GOMAXPROCS=1
		}
	})
	got := make([]engine.Decision, ops)
	for i, o := range script {
		got[i] = swept.AllowAt(time.Unix(0, o.at), o.key, o.cost)
		published.Store(o.at)
		if i%500 == 499 {
			// Let at least one sweep finish per 500 takes, so that sweeps
			// really interleave with the takes even when the sweeping
			// goroutine is slow to be scheduled on a busy machine.
			for seen := sweeps.Load(); sweeps.Load() == seen; {
				runtime.Gosched()
			}
		}
	}
	close(stop)
	wg.Wait()
	for i, o := range script {
		want := plain.AllowAt(time.Unix(0, o.at), o.key, o.cost)
		if got[i].Allowed != want.Allowed || got[i].Remaining != want.Remaining {
			t.Fatalf("op %d (%+v): with sweeps %+v, without %+v", i, o, got[i], want)
		}
	}
	if evictions.Load() == 0 {
		t.Error("the sweeper evicted nothing; the test proved nothing")
	}
	if s := swept.Stats(); s.Evicted != uint64(evictions.Load()) || s.Live != swept.Len() {
		t.Errorf("Stats %+v, evictions %d", s, evictions.Load())
	}
}

// sweepUntilStopped calls e.SweepAt(at) in a loop on another goroutine until
// the returned function is called; that function waits for the loop to end.
func sweepUntilStopped(e *engine.Engine, at time.Time) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				e.SweepAt(at)
				runtime.Gosched()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// Concurrent takes on the same keys as concurrent sweeps: a take that races
// an eviction is never lost (frozen clock: every admitted take stays spent).
func TestConcurrentSweepKeepsTakes(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 5, Shards: 2})
	const keys = 32
	stopSweeping := sweepUntilStopped(e, t0)
	var admitted [keys]atomic.Int64
	var takers sync.WaitGroup
	for g := range 4 {
		takers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			for range 20000 {
				k := rng.IntN(keys)
				if e.AllowAt(t0, fmt.Sprint("k", k), 1).Allowed {
					admitted[k].Add(1)
				}
			}
		})
	}
	takers.Wait()
	stopSweeping()
	for k := range keys {
		if got := admitted[k].Load(); got != 5 {
			t.Errorf("key %d: admitted %d at a frozen clock, want exactly the burst 5", k, got)
		}
	}
}

// Decisions do not depend on the number of shards.
func TestShardCountDoesNotChangeDecisions(t *testing.T) {
	var runs [][]engine.Decision
	for _, shards := range []int{1, 2, 64} {
		e := newEngine(t, engine.Config{Limit: 50, Burst: 4, Shards: shards})
		rng := rand.New(rand.NewPCG(6, 7))
		var out []engine.Decision
		var now int64
		for range 20000 {
			now += int64(rng.IntN(5_000_000))
			out = append(out, e.AllowAt(time.Unix(0, now), fmt.Sprint(rng.IntN(500)), float64(rng.IntN(5))))
			if rng.IntN(1000) == 0 {
				e.SweepAt(time.Unix(0, now))
			}
		}
		runs = append(runs, out)
	}
	for i := range runs[0] {
		if runs[0][i] != runs[1][i] || runs[0][i] != runs[2][i] {
			t.Fatalf("op %d: shards 1/2/64 decided %+v / %+v / %+v", i, runs[0][i], runs[1][i], runs[2][i])
		}
	}
}

// An attacker floods one shard with new keys while clients spend theirs:
// every new key grows the shard's index, and each growth rebuilds it under
// calls that loaded the old index before they read the clock (Allow's
// prefetch). Those calls must find the old slots tombed and look again, so
// each client key still yields exactly its burst, never a token more and
// never a fresh bucket.
func TestAllowRacingAFloodOfNewKeys(t *testing.T) {
	const clients, burst, flood = 8, 50, 40_000
	// An empty bucket refills in 366 days (the longest allowed): no token
	// comes back within the test, on the real clock.
	e := newEngine(t, engine.Config{Limit: burst / 31622400.0, Burst: burst, Shards: 1, SweepInterval: -1})
	var admitted [clients]atomic.Int64
	var flooded atomic.Bool
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			// Enough calls to drain every client key, and more until the
			// flood is over.
			for i := 0; i < 2*clients*burst || !flooded.Load(); i++ {
				k := (i + g) % clients
				if e.Allow(fmt.Sprintf("client-%d", k)) {
					admitted[k].Add(1)
				}
			}
		})
	}
	for i := range flood {
		e.Allow(fmt.Sprintf("flood-%d", i))
	}
	flooded.Store(true)
	wg.Wait()
	for k := range clients {
		if n := admitted[k].Load(); n != burst {
			t.Errorf("client-%d admitted %d, want exactly %d", k, n, burst)
		}
	}
}
