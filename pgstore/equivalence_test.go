package pgstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Equivalence (the engine's decisions, from the store): the same operation
// stream, at the same times, gives identical Decisions from a Limiter and
// from engine.Engine.AllowAt / TakeAllAt. The store is given the times
// (the functions' at_us argument, which only tests pass); the engine gets
// an epoch at which both refill grids are on a whole quantum (the store's
// grid counts from the Unix epoch).

// equivConfigs spans slow and fast rates, fractional bursts, decimal rates,
// rates whose fraction has a huge denominator, and the largest burst with
// the engine's 1 ns tick.
var equivConfigs = []Config{
	{Limit: 1000, Burst: 5},
	{Limit: 10, Burst: 3},
	{Limit: 2.5, Burst: 1},
	{Limit: 7, Burst: 100.5},
	{Limit: 0.5, Burst: 2},
	{Limit: 333, Burst: 10},
	{Limit: 0.1, Burst: 1.5},
	{Limit: 123.456, Burst: 50.25},
	{Limit: 1000, Burst: 268435},
	{Limit: 1 + 1.0/(1<<30), Burst: 5},
	{Limit: 700 + 1.0/(1<<20), Burst: 1000},
	{Limit: 1.0 / 12, Burst: 2},
	{Limit: 1.0 / (1 << 20), Burst: 3},
	{Limit: 1.0 / (1 << 24), Burst: 1},
}

// costs mixes peeks, fractions, whole tokens, the whole burst, and costs
// that can never pass.
func costs(burst float64) []float64 {
	return []float64{0, 0.001, 0.5, 1, 1, 1, 1, 2, 3.7, burst, burst - 0.001, burst + 1, -1, math.NaN()}
}

// mirror returns an engine for cfg whose refill grid has the store's phase.
func mirror(t *testing.T, cfg Config, start time.Time) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{Limit: cfg.Limit, Burst: cfg.Burst, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	// The store's grid counts from the Unix epoch, at the engine's own
	// rate (fixedpoint.Layout.Rate), which for a rate such as 0.1 is a
	// hair off the decimal: by 2026 the two grids would part by 100 ns
	// if the engine's counted from anywhere else.
	e.AllowAt(time.Unix(0, 0), "\x00epoch", 0)
	_ = start
	return e
}

func same(a, b engine.Decision) bool {
	return a.Allowed == b.Allowed && a.Remaining == b.Remaining &&
		a.RetryAfter == b.RetryAfter && a.ResetAfter == b.ResetAfter
}

// takeAt is TakeAll at microsecond us of the store's clock.
func takeAt(t *testing.T, l *Limiter, us int64, takes []engine.Take, out []engine.Decision) int {
	t.Helper()
	k, at, err := l.takeAll(context.Background(), takes, out, &us)
	if err != nil {
		t.Fatal(err)
	}
	if at.UnixMicro() != us {
		t.Fatalf("the store decided at %d, not at the time given, %d", at.UnixMicro(), us)
	}
	return k
}

// TestEquivalence replays random streams of single takes: gaps from nothing
// to twice the fill time, and steps back. A clock that steps back must not
// create tokens: the store, like the engine, keeps a bucket's latest time.
func TestEquivalence(t *testing.T) {
	db := newDB(t, Schema{})
	for i, cfg := range equivConfigs {
		t.Run(fmt.Sprintf("limit=%v,burst=%v", cfg.Limit, cfg.Burst), func(t *testing.T) {
			cfg.Prefix, cfg.Timeout = uniquePrefix(), 10*time.Second
			l, err := New(db, cfg)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7919 * time.Microsecond)
			e := mirror(t, cfg, now)
			fill := time.Duration(cfg.Burst / float64(cfg.Limit) * 1e9)
			long := min(fill, 30*24*time.Hour)
			token := min(time.Duration(2e9/float64(cfg.Limit)), 24*time.Hour)
			rng := rand.New(rand.NewPCG(2, uint64(i)))
			keys := []string{"a", "b", "c"}
			cs := costs(cfg.Burst)
			var allowed, denied int
			history := map[string][]string{}
			for op := range 400 {
				key, n := keys[rng.IntN(len(keys))], cs[rng.IntN(len(cs))]
				var out [1]engine.Decision
				takeAt(t, l, now.UnixMicro(), []engine.Take{{Limiter: l, Key: key, N: n}}, out[:])
				want := e.AllowAt(now, key, n)
				if !same(out[0], want) {
					t.Fatalf("op %d at %v: Take(%q, %v)\nstore  %+v\nengine %+v\nearlier on this key:\n%v", op, now.Format(time.RFC3339Nano), key, n, out[0], want, history[key])
				}
				h := append(history[key], fmt.Sprintf("%v n=%v %+v\n", now.Format(time.RFC3339Nano), n, out[0]))
				history[key] = h[max(0, len(h)-4):]
				if n > 0 && n <= cfg.Burst {
					if out[0].Allowed {
						allowed++
					} else {
						denied++
					}
				}
				var d time.Duration
				switch rng.IntN(10) {
				case 0: // back in time
					d = -time.Duration(rng.Int64N(int64(fill/4) + 1))
				case 1, 2: // long: buckets refill, some fully
					d = time.Duration(rng.Int64N(2*int64(long) + 1))
				case 3:
					d = 0
				default: // a fraction of a token's refill
					d = time.Duration(rng.Int64N(int64(token) + 1))
				}
				now = now.Add(d.Truncate(time.Microsecond))
			}
			if allowed == 0 || denied == 0 {
				t.Fatalf("stream exercised only one outcome: %d allowed, %d denied", allowed, denied)
			}
		})
	}
}

// TestTakeAllEquivalence: TakeAll over two Limiters, keys repeated
// included, gives the denied index and every Decision that
// engine.Engine.TakeAllAt gives at the same times.
func TestTakeAllEquivalence(t *testing.T) {
	db := newDB(t, Schema{})
	cfgs := []Config{{Limit: 10, Burst: 3}, {Limit: 25, Burst: 5.5}, {Limit: 0.1, Burst: 2}}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var ls []*Limiter
	var es []*engine.Engine
	for _, cfg := range cfgs {
		cfg.Prefix, cfg.Timeout = uniquePrefix(), 10*time.Second
		l, err := New(db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		es = append(es, mirror(t, cfg, now))
	}
	keys := []string{"a", "b", "c"}
	rng := rand.New(rand.NewPCG(5, 6))
	var allowedCalls, deniedCalls int
	for op := range 1500 {
		n := 1 + rng.IntN(4)
		takes := make([]engine.Take, n)
		etakes := make([]engine.Take, n)
		for i := range takes {
			li, ki := rng.IntN(len(ls)), rng.IntN(len(keys))
			cs := costs(cfgs[li].Burst)
			cost := cs[rng.IntN(len(cs))]
			if rng.IntN(3) > 0 {
				cost = 1 // mostly takes that can pass, so that calls succeed
			}
			takes[i] = engine.Take{Limiter: ls[li], Key: keys[ki], N: cost}
			etakes[i] = engine.Take{Limiter: es[li], Key: keys[ki], N: cost}
		}
		out := make([]engine.Decision, n)
		k := takeAt(t, ls[0], now.UnixMicro(), takes, out)
		want := make([]engine.Decision, n)
		wk, _ := es[0].TakeAllAt(now, etakes, want)
		if k != wk {
			t.Fatalf("op %d %v: denied %d, engine %d\nstore  %+v\nengine %+v", op, takes, k, wk, out, want)
		}
		for i := range out {
			if k >= 0 && repeated(takes, i) {
				// The engine reports a denied call's repeated key as it
				// is after giving back the takes from this one on, not
				// before: states the bucket passed through. Only the
				// verdict is compared.
				if out[i].Allowed {
					t.Fatalf("op %d take %d of %v: allowed in a denied call", op, i, takes)
				}
				// The denied take's wait is the same: until its bucket
				// holds what the call's takes of it cost up to it.
				if i == k && out[i].RetryAfter != want[i].RetryAfter {
					t.Fatalf("op %d denied take %d of %v: RetryAfter %v, engine %v", op, i, takes, out[i].RetryAfter, want[i].RetryAfter)
				}
				continue
			}
			if !same(out[i], want[i]) {
				t.Fatalf("op %d take %d of %v:\nstore  %+v\nengine %+v", op, i, takes, out[i], want[i])
			}
		}
		if k < 0 {
			allowedCalls++
		} else {
			deniedCalls++
		}
		now = now.Add(time.Duration(rng.Int64N(int64(150 * time.Millisecond))).Truncate(time.Microsecond))
	}
	if allowedCalls < 100 || deniedCalls < 100 {
		t.Fatalf("%d allowed, %d denied: the stream missed an outcome", allowedCalls, deniedCalls)
	}
}

// repeated reports whether takes[i]'s bucket appears in another take.
func repeated(takes []engine.Take, i int) bool {
	for j := range takes {
		if j != i && takes[j].Limiter == takes[i].Limiter && takes[j].Key == takes[i].Key {
			return true
		}
	}
	return false
}
