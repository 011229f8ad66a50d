package redisstore

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
	"github.com/redis/rueidis"
)

// Equivalence (the engine's decisions, from the store): the same operation
// stream, at the same times, gives identical Decisions from a Limiter and
// from engine.Engine.AllowAt. The store's times are the server's TIME, which
// each call reports; the engine is given them, with an epoch at which both
// refill grids are on a whole quantum (the store's grid counts from the Unix
// epoch): a whole second for rates with at most three decimals, the Unix
// epoch itself for the others.

// equivConfigs spans slow and fast rates, fractional bursts, decimal rates
// and the largest burst with the engine's 1 ns tick.
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
	// Rates whose fraction p/q has p*q far above 2^53: the scripts' muldiv
	// slow path.
	{Limit: 1 + 1.0/(1<<30), Burst: 5},
	{Limit: 700 + 1.0/(1<<20), Burst: 1000},
	// Rates of a token every 12 days and every 194 days, which the store's
	// fractions hold exactly (12 a year does not: see TestUnitsStayExact).
	{Limit: 1.0 / (1 << 20), Burst: 3},
	{Limit: 1.0 / (1 << 24), Burst: 1},
}

// costs mixes peeks, fractions, whole tokens, the whole burst, and costs that
// can never pass.
func costs(burst float64) []float64 {
	return []float64{0, 0.001, 0.5, 1, 1, 1, 1, 2, 3.7, burst, burst - 0.001, burst + 1, -1, math.NaN()}
}

// takeTimed is Take that also returns the server time of the decision.
func takeTimed(t *testing.T, l *Limiter, key string, n float64) (engine.Decision, time.Time) {
	t.Helper()
	var out [1]engine.Decision
	_, now, err := l.takeAll(context.Background(), []engine.Take{{Limiter: l, Key: key, N: n}}, out[:])
	if err != nil {
		t.Fatal(err)
	}
	return out[0], now
}

// mirror returns an engine for cfg whose refill grid has the store's phase.
func mirror(t *testing.T, cfg Config, start time.Time) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{Limit: cfg.Limit, Burst: cfg.Burst, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	epoch := time.Unix(start.Unix()-1, 0)
	if r := float64(cfg.Limit) * 1000; r != math.Trunc(r) {
		epoch = time.Unix(0, 0)
	}
	e.AllowAt(epoch, "\x00epoch", 0)
	return e
}

func same(a, b engine.Decision) bool {
	return a.Allowed == b.Allowed && a.Remaining == b.Remaining &&
		a.RetryAfter == b.RetryAfter && a.ResetAfter == b.ResetAfter
}

// replay runs ops operations through l and e and fails on the first
// difference. advance, called between operations, moves the server's clock
// (really, or by setting it). Operations at an instant on the decimal grid
// of an inexact rate (onDecimalGrid) are not compared; aside counts them.
func replay(t *testing.T, l *Limiter, cfg Config, rng *rand.Rand, ops int, advance func()) (allowed, denied, aside int) {
	t.Helper()
	keys := []string{"a", "b", "c"}
	cs := costs(cfg.Burst)
	_, start := takeTimed(t, l, "\x00start", 0)
	e := mirror(t, cfg, start)
	history := map[string][]string{}
	for i := range ops {
		k := rng.IntN(len(keys))
		key, n := keys[k], cs[rng.IntN(len(cs))]
		got, at := takeTimed(t, l, key, n)
		want := e.AllowAt(at, key, n)
		if onDecimalGrid(l.s.u, at) {
			// The engine's grid passed this instant a hair earlier: a
			// bucket found full here is stamped a quantum later in the
			// engine than in the store (package doc, Units). The key is
			// left for a new one, which both hold full.
			keys[k] += "'"
			aside++
			advance()
			continue
		}
		if !same(got, want) {
			t.Fatalf("op %d at %v: Take(%q, %v)\nstore  %+v\nengine %+v\nearlier on this key:\n%v", i, at.Format(time.RFC3339Nano), key, n, got, want, history[key])
		}
		h := append(history[key], fmt.Sprintf("%v n=%v %+v\n", at.Format(time.RFC3339Nano), n, got))
		history[key] = h[max(0, len(h)-4):]
		if got.Allowed {
			allowed++
		} else {
			denied++
		}
		advance()
	}
	return allowed, denied, aside
}

// onDecimalGrid reports whether at is an instant at which the store's
// refill grid is on a whole quantum while its rate fraction is not the
// configured float64 exactly (0.1 and 123.456: the fraction is the
// decimal, the float64 a hair above it).
func onDecimalGrid(u units, at time.Time) bool {
	if u.exact {
		return false
	}
	hi, lo := bits.Mul64(uint64(at.UnixMicro()), u.p)
	return bits.Rem64(hi, lo, u.q) == 0
}

// equivLimiter is a Limiter for cfg under prefix, with a deadline that a
// loaded machine does not reach.
func equivLimiter(t *testing.T, c rueidis.Client, cfg Config, prefix string) *Limiter {
	t.Helper()
	cfg.Prefix, cfg.Timeout = prefix, 10*time.Second
	l, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestEquivalenceRealServer(t *testing.T) {
	s := redistest.Start(t)
	c := newRue(t, s.Addr())
	for i, cfg := range equivConfigs {
		t.Run(fmt.Sprintf("limit=%v,burst=%v", cfg.Limit, cfg.Burst), func(t *testing.T) {
			l := equivLimiter(t, c, cfg, fmt.Sprintf("eq%d:", i))
			rng := rand.New(rand.NewPCG(1, uint64(i)))
			allowed, denied, _ := replay(t, l, cfg, rng, 300, func() {
				// Mostly back to back; sometimes long enough for fast
				// buckets to refill, and for a few keys to expire full.
				if rng.IntN(8) == 0 {
					time.Sleep(time.Duration(rng.IntN(6000)) * time.Microsecond)
				}
			})
			if allowed == 0 || denied == 0 {
				t.Fatalf("stream exercised only one outcome: %d allowed, %d denied", allowed, denied)
			}
		})
	}
}

// miniRue returns a miniredis server (whose TIME the test sets) and a rueidis
// client for it.
func miniRue(t *testing.T) (*miniredis.Miniredis, rueidis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return m, c
}

// Decimal rates that float64 holds only approximately (0.1, 123.456), on a
// clock that often lands on the store's grid: the store stamps a bucket
// found full there at that instant, exactly on its decimal refill, and
// every operation off such instants gives the engine's Decision.
func TestEquivalenceOnTheDecimalGrid(t *testing.T) {
	m, c := miniRue(t)
	for i, cfg := range []Config{{Limit: 0.1, Burst: 1.5}, {Limit: 123.456, Burst: 50.25}} {
		t.Run(fmt.Sprintf("limit=%v,burst=%v", cfg.Limit, cfg.Burst), func(t *testing.T) {
			l := equivLimiter(t, c, cfg, fmt.Sprintf("grid%d:", i))
			u := l.s.u
			if u.exact {
				t.Fatalf("units %+v: want a rate the store holds only as its decimal", u)
			}
			// The grid's whole quanta fall every q/gcd(p, q) microseconds.
			step := time.Duration(u.q/gcd(u.p, u.q)) * time.Microsecond
			now := time.Date(2026, 11, 29, 11, 57, 33, 0, time.UTC)
			m.SetTime(now)
			if !onDecimalGrid(u, now) {
				t.Fatalf("%v is not on the grid (step %v)", now, step)
			}
			d, at := takeTimed(t, l, "fresh", cfg.Burst)
			// The exact decimal refill of the whole burst, rounded up to a
			// nanosecond: capacity*q/p microseconds.
			fill := time.Duration((u.capacity*u.q*1000 + u.p - 1) / u.p)
			if !at.Equal(now) || !d.Allowed || d.ResetAfter != fill {
				t.Fatalf("the whole burst at %v, on the grid: %+v, want allowed, full again in exactly %v", at, d, fill)
			}
			rng := rand.New(rand.NewPCG(6, uint64(i)))
			_, _, aside := replay(t, l, cfg, rng, 400, func() {
				if rng.IntN(2) == 0 {
					now = now.Add(time.Duration(1+rng.IntN(40)) * step) // on the grid
				} else {
					now = now.Add(time.Duration(1+rng.IntN(40))*step + time.Duration(1+rng.IntN(int(step/time.Microsecond)-1))*time.Microsecond)
				}
				m.SetTime(now)
			})
			if aside == 0 || aside > 300 {
				t.Errorf("%d of 400 operations on the grid, want some, and most compared", aside)
			}
		})
	}
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// TestEquivalenceVirtualClock replays streams against a server whose clock
// the test moves: gaps from nothing to twice the fill time, and steps back.
// A clock that steps back must not create tokens: the store, like the
// engine, counts an earlier time as the bucket's last update.
func TestEquivalenceVirtualClock(t *testing.T) {
	m, c := miniRue(t)
	for i, cfg := range equivConfigs {
		t.Run(fmt.Sprintf("limit=%v,burst=%v", cfg.Limit, cfg.Burst), func(t *testing.T) {
			l := equivLimiter(t, c, cfg, fmt.Sprintf("vq%d:", i))
			now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7919 * time.Microsecond)
			m.SetTime(now)
			fill := time.Duration(cfg.Burst / float64(cfg.Limit) * 1e9)
			// The scripts count microseconds since 1970 below 2^53 (until
			// 2255), and the engine's clamp is 146 years from its epoch: a
			// slow rate's fill or token must not be jumped hundreds of times.
			long := min(fill, 30*24*time.Hour)
			token := min(time.Duration(2e9/float64(cfg.Limit)), 24*time.Hour)
			rng := rand.New(rand.NewPCG(2, uint64(i)))
			steps := 1200
			if testing.Short() {
				steps = 400
			}
			replay(t, l, cfg, rng, steps, func() {
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
				d = d.Truncate(time.Microsecond)
				now = now.Add(d)
				// Keys do not expire here (miniredis expires them only
				// when told): a key that expired at a later reading of a
				// clock that then steps back is full, as it was then,
				// where the engine's bucket would still be refilling (see
				// TestExpiryThenClockBack). Expiry on a steady clock is
				// covered by TestEquivalenceRealServer.
				m.SetTime(now)
			})
		})
	}
}

// TestExpiryThenClockBack pins down the one place where the store and the
// engine part on a clock that steps back: a bucket's key expires when the
// bucket is full, and Redis forgets it; if the server's clock then steps back
// before that instant, the bucket is full, as it was at the later reading,
// where the engine (which keeps the bucket's time) would still be refilling.
// The bucket never holds more than Burst, and the tokens it shows were all
// refilled by the newest reading of the clock.
func TestExpiryThenClockBack(t *testing.T) {
	m, c := miniRue(t)
	l, err := New(c, Config{Limit: 10, Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	m.SetTime(t0)
	if d, _ := takeTimed(t, l, "k", 5); !d.Allowed || d.Remaining != 0 || d.ResetAfter != 500*time.Millisecond {
		t.Fatalf("drain: %+v", d)
	}
	if ttl := m.TTL(l.KeyFor("k")); ttl < 500*time.Millisecond || ttl > 502*time.Millisecond {
		t.Fatalf("TTL %v, want the time to a full refill (500 ms) plus at most 2 ms of rounding", ttl)
	}
	m.SetTime(t0.Add(time.Second))
	m.FastForward(time.Second)
	if m.Exists(l.KeyFor("k")) {
		t.Fatal("key of a full bucket still exists after its TTL")
	}
	m.SetTime(t0.Add(250 * time.Millisecond))
	if d, _ := takeTimed(t, l, "k", 0); d.Remaining != 5 {
		t.Fatalf("after expiry and a step back: %+v, want a full bucket", d)
	}
}

// TestTTLCoversTheRefill: a bucket's key lives at least until the bucket is
// full again (its Decision's ResetAfter), or Redis would forget a bucket
// still refilling, and not much longer: at most one quantum's refill and
// 3 ms of rounding beyond it.
func TestTTLCoversTheRefill(t *testing.T) {
	m, c := miniRue(t)
	for i, cfg := range equivConfigs {
		l := equivLimiter(t, c, cfg, fmt.Sprintf("ttl%d:", i))
		quantum := time.Duration(float64(l.s.u.q)/float64(l.s.u.p)*1000) + time.Nanosecond
		now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7919 * time.Microsecond)
		rng := rand.New(rand.NewPCG(5, uint64(i)))
		cs := costs(cfg.Burst)
		taken := 0
		for range 300 {
			now = now.Add(time.Duration(rng.Int64N(int64(2e9/float64(cfg.Limit)) + 1)).Truncate(time.Microsecond))
			m.SetTime(now)
			key, n := []string{"a", "b"}[rng.IntN(2)], cs[rng.IntN(len(cs))]
			d, _ := takeTimed(t, l, key, n)
			if !d.Allowed || n == 0 {
				continue
			}
			taken++
			ttl := m.TTL(l.KeyFor(key))
			if ttl < d.ResetAfter || ttl > d.ResetAfter+quantum+3*time.Millisecond {
				t.Fatalf("limit %v burst %v: TTL %v after a take with ResetAfter %v (a quantum refills in %v)", cfg.Limit, cfg.Burst, ttl, d.ResetAfter, quantum)
			}
		}
		if taken == 0 {
			t.Fatalf("limit %v burst %v: no take to check", cfg.Limit, cfg.Burst)
		}
	}
}

// TestTakeAllEquivalence: TakeAll over two Limiters gives the denied index
// and every Decision that engine.Engine.TakeAllAt gives at the same times, both
// when the keys share a hash tag (one atomic script) and when they do not
// (one script per take, given back on denial; the virtual clock stands still
// during a call, as it does for TakeAllAt).
func TestTakeAllEquivalence(t *testing.T) {
	t.Run("one slot", func(t *testing.T) { takeAllEquivalence(t, []string{"{g}:a", "{g}:b", "{g}"}) })
	t.Run("across slots", func(t *testing.T) {
		if slotOf("{a}") == slotOf("{b}") || slotOf("{b}") == slotOf("{c}") {
			t.Fatal("keys share a slot; pick others")
		}
		takeAllEquivalence(t, []string{"a", "b", "c"})
	})
}

func takeAllEquivalence(t *testing.T, keys []string) {
	m, c := miniRue(t)
	cfgs := []Config{{Limit: 10, Burst: 3, Prefix: "user:"}, {Limit: 25, Burst: 5.5, Prefix: "tenant:"}}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	m.SetTime(now)
	var ls []*Limiter
	var es []*engine.Engine
	for _, cfg := range cfgs {
		cfg.Timeout = 10 * time.Second
		l, err := New(c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		es = append(es, mirror(t, cfg, now))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var allowedCalls, deniedCalls int
	for op := range 2000 {
		// Up to three takes on distinct (Limiter, key) buckets.
		n := 1 + rng.IntN(3)
		var takes []engine.Take
		var etakes []engine.Take
		seen := map[[2]int]bool{}
		for len(takes) < n {
			li, ki := rng.IntN(len(ls)), rng.IntN(len(keys))
			if seen[[2]int{li, ki}] {
				continue
			}
			seen[[2]int{li, ki}] = true
			cs := costs(cfgs[li].Burst)
			cost := cs[rng.IntN(len(cs))]
			takes = append(takes, engine.Take{Limiter: ls[li], Key: keys[ki], N: cost})
			etakes = append(etakes, engine.Take{Limiter: es[li], Key: ls[li].KeyFor(keys[ki]), N: cost})
		}
		out := make([]engine.Decision, n)
		k, at, err := ls[0].takeAll(context.Background(), takes, out)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]engine.Decision, n)
		wk, _ := es[0].TakeAllAt(at, etakes, want)
		if k != wk {
			t.Fatalf("op %d: denied %d, engine %d\nstore  %+v\nengine %+v", op, k, wk, out, want)
		}
		for i := range out {
			if !same(out[i], want[i]) {
				t.Fatalf("op %d take %d (%v):\nstore  %+v\nengine %+v", op, i, takes[i], out[i], want[i])
			}
		}
		if k < 0 {
			allowedCalls++
		} else {
			deniedCalls++
		}
		now = now.Add(time.Duration(rng.Int64N(int64(300 * time.Millisecond))).Truncate(time.Microsecond))
		m.SetTime(now)
	}
	if allowedCalls == 0 || deniedCalls == 0 {
		t.Fatalf("%d allowed, %d denied: the stream missed an outcome", allowedCalls, deniedCalls)
	}
}
