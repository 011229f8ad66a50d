package engine_test

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

var t0 = time.Unix(0, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func newEngine(t testing.TB, cfg engine.Config) *engine.Engine {
	t.Helper()
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

type step struct {
	t         time.Duration
	n         float64
	ok        bool
	remaining float64
	retry     time.Duration
}

func run(t *testing.T, e *engine.Engine, key string, steps []step) {
	t.Helper()
	for i, s := range steps {
		d := e.AllowAt(at(s.t), key, s.n)
		if d.Allowed != s.ok || d.Remaining != s.remaining || d.RetryAfter != s.retry {
			t.Errorf("step %d: AllowAt(%v, %q, %v) = %+v, want ok=%v remaining=%v retry=%v",
				i, s.t, key, s.n, d, s.ok, s.remaining, s.retry)
		}
	}
}

func TestBurstThenRefill(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 3})
	run(t, e, "k", []step{
		{0, 1, true, 2, 0},
		{0, 1, true, 1, 0},
		{0, 1, true, 0, 0},
		{0, 1, false, 0, 100 * time.Millisecond},
		{50 * time.Millisecond, 1, false, 0.5, 50 * time.Millisecond},
		{100 * time.Millisecond, 1, true, 0, 0},
		{350 * time.Millisecond, 2, true, 0.5, 0},
		{360 * time.Millisecond, 0.6, true, 0, 0},
		{10 * time.Second, 3, true, 0, 0}, // long idle: full, not more
		{10 * time.Second, 0.001, false, 0, 100 * time.Microsecond},
	})
}

func TestWeightedAndFractionalCosts(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 5})
	run(t, e, "k", []step{
		{0, 2.5, true, 2.5, 0},
		{0, 2.5, true, 0, 0},
		{0, 0.001, false, 0, time.Millisecond},
		{1500 * time.Millisecond, 1.5, true, 0, 0},
		{1500 * time.Millisecond, 0, true, 0, 0}, // peek on empty
		{2 * time.Second, 0.5, true, 0, 0},
	})
}

// A denied request changes nothing, so polling cannot starve a bucket: rate
// 1/s, burst 1, drained at 0 s, polled every 1 ms for 3 s: admitted exactly
// at 1 s, 2 s and 3 s.
func TestPollingDoesNotStarve(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
	if !e.AllowAt(t0, "k", 1).Allowed {
		t.Fatal("first take denied")
	}
	var admitted []time.Duration
	for ms := 1; ms <= 3000; ms++ {
		d := time.Duration(ms) * time.Millisecond
		if e.AllowAt(at(d), "k", 1).Allowed {
			admitted = append(admitted, d)
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if fmt.Sprint(admitted) != fmt.Sprint(want) {
		t.Fatalf("admitted at %v, want %v", admitted, want)
	}
}

// A time before the bucket's last update counts as that update.
func TestBackwardTimeCreatesNothing(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 2})
	run(t, e, "k", []step{
		{10 * time.Second, 2, true, 0, 0},
		{5 * time.Second, 1, false, 0, 6 * time.Second}, // counted as 10 s
		{11 * time.Second, 1, true, 0, 0},
		{0, 0, true, 0, 0},
		{-time.Hour, 1, false, 0, time.Hour + 12*time.Second},
		{12 * time.Second, 1, true, 0, 0},
	})
	if got := e.TokensAt(at(time.Second), "k"); got != 0 {
		t.Errorf("TokensAt(before last update) = %v, want 0", got)
	}
}

// AllowAt(t < last) must behave exactly as AllowAt(last): same decision,
// same later history.
func TestBackwardTimeEqualsLastUpdate(t *testing.T) {
	a := newEngine(t, engine.Config{Limit: 3, Burst: 4})
	b := newEngine(t, engine.Config{Limit: 3, Burst: 4})
	times := []time.Duration{0, 700 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond, 100 * time.Millisecond, 2 * time.Second, time.Second}
	var last time.Duration
	for i, d := range times {
		last = max(last, d)
		da, db := a.AllowAt(at(d), "k", 1.5), b.AllowAt(at(last), "k", 1.5)
		if da.Allowed != db.Allowed || da.Remaining != db.Remaining || da.ResetAfter-db.ResetAfter != last-d {
			t.Errorf("op %d at %v: %+v; at clamped %v: %+v", i, d, da, last, db)
		}
	}
}

func TestDeniedLeavesStateUnchanged(t *testing.T) {
	a := newEngine(t, engine.Config{Limit: 7, Burst: 10})
	b := newEngine(t, engine.Config{Limit: 7, Burst: 10})
	a.AllowAt(t0, "k", 9.5)
	b.AllowAt(t0, "k", 9.5)
	for i := 1; i <= 200; i++ {
		d := a.AllowAt(at(time.Duration(i)*time.Millisecond), "k", 5)
		if d.Allowed {
			t.Fatalf("take of 5 at %d ms allowed with %v tokens", i, d.Remaining)
		}
	}
	for _, d := range []time.Duration{300 * time.Millisecond, 650 * time.Millisecond, 700 * time.Millisecond, 1300 * time.Millisecond} {
		da, db := a.AllowAt(at(d), "k", 5), b.AllowAt(at(d), "k", 5)
		if da != db {
			t.Errorf("at %v: with denied polls %+v, without %+v", d, da, db)
		}
	}
}

func TestNeverSatisfiable(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 10})
	e.AllowAt(t0, "k", 4)
	for _, n := range []float64{10.001, 11, -1, math.NaN(), math.Inf(1), math.Inf(-1), 1e300} {
		d := e.AllowAt(at(time.Second), "k", n)
		if d.Allowed || d.RetryAfter != engine.InfDuration || d.Remaining != 7 || d.ResetAfter != 3*time.Second {
			t.Errorf("AllowAt(n=%v) = %+v, want denied, RetryAfter Inf, Remaining 7, ResetAfter 3s", n, d)
		}
	}
	if got := e.TokensAt(at(time.Second), "k"); got != 7 {
		t.Errorf("tokens after invalid costs = %v, want 7 (unchanged)", got)
	}
	// Unknown key, invalid cost: no bucket is created.
	if d := e.AllowAt(t0, "other", 11); d.Allowed || d.Remaining != 10 || e.Len() != 1 {
		t.Errorf("invalid cost on a new key: %+v, Len %d", d, e.Len())
	}
	if d := e.AllowAt(t0, "full", 10); !d.Allowed || d.Remaining != 0 {
		t.Errorf("cost == Burst on a new key: %+v, want allowed", d)
	}
}

func TestPeekAndObserveCreateNothing(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 2})
	if d := e.AllowAt(t0, "a", 0); !d.Allowed || d.Remaining != 2 {
		t.Errorf("peek on unknown key = %+v", d)
	}
	if got := e.TokensAt(t0, "b"); got != 2 {
		t.Errorf("TokensAt(unknown) = %v, want Burst 2", got)
	}
	if e.Len() != 0 {
		t.Errorf("Len = %d after peeks, want 0", e.Len())
	}
	e.AllowAt(t0, "a", 1)
	if d := e.AllowAt(at(500*time.Millisecond), "a", 0); !d.Allowed || d.Remaining != 1.5 {
		t.Errorf("peek = %+v, want allowed with 1.5", d)
	}
	if got := e.TokensAt(at(500*time.Millisecond), "a"); got != 1.5 {
		t.Errorf("TokensAt = %v, want 1.5", got)
	}
}

func TestKeysAreIsolated(t *testing.T) {
	for _, shards := range []int{1, 64} {
		e := newEngine(t, engine.Config{Limit: 1, Burst: 2, Shards: shards})
		keys := []string{"", "a", "b", "ab", "a\x00", strings.Repeat("x", 70000), strings.Repeat("x", 69999)}
		for _, k := range keys {
			if !e.AllowAt(t0, k, 2).Allowed {
				t.Errorf("shards=%d: first take of key len %d denied", shards, len(k))
			}
		}
		for _, k := range keys {
			if e.AllowAt(t0, k, 1).Allowed {
				t.Errorf("shards=%d: key len %d not drained", shards, len(k))
			}
		}
		if e.Len() != len(keys) {
			t.Errorf("shards=%d: Len = %d, want %d", shards, e.Len(), len(keys))
		}
	}
}

func TestEvery(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want engine.Limit
	}{
		{time.Second, 1},
		{100 * time.Millisecond, 10},
		{time.Nanosecond, 1e9},
		{24 * time.Hour, 1.0 / 86400},
	} {
		if got := engine.Every(tt.d); got != tt.want {
			t.Errorf("Every(%v) = %v, want %v", tt.d, got, tt.want)
		}
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if got := engine.Every(d); !math.IsInf(float64(got), 1) {
			t.Errorf("Every(%v) = %v, want +Inf", d, got)
		}
	}
	// The slowest and fastest rates of the domain are accepted.
	newEngine(t, engine.Config{Limit: engine.Every(24 * time.Hour), Burst: 1})
	newEngine(t, engine.Config{Limit: engine.Every(time.Nanosecond), Burst: 1e9})
}

func TestConfigErrors(t *testing.T) {
	ok := engine.Config{Limit: 10, Burst: 20}
	for _, tt := range []struct {
		name   string
		edit   func(*engine.Config)
		fields []string
	}{
		{"limit zero", func(c *engine.Config) { c.Limit = 0 }, []string{"Limit", "1/31622400", "1e9", "got 0"}},
		{"limit negative", func(c *engine.Config) { c.Limit = -1 }, []string{"Limit", "got -1"}},
		{"limit NaN", func(c *engine.Config) { c.Limit = engine.Limit(math.NaN()) }, []string{"Limit", "NaN"}},
		{"limit inf", func(c *engine.Config) { c.Limit = engine.Every(0) }, []string{"Limit", "+Inf"}},
		{"limit too slow", func(c *engine.Config) { c.Limit = engine.Every(367 * 24 * time.Hour); c.Burst = 1 }, []string{"Limit"}},
		{"limit too fast", func(c *engine.Config) { c.Limit = 1.1e9 }, []string{"Limit"}},
		{"burst zero", func(c *engine.Config) { c.Burst = 0 }, []string{"Burst", "between 1 and 1e9", "got 0"}},
		{"burst below one", func(c *engine.Config) { c.Burst = 0.5 }, []string{"Burst", "got 0.5"}},
		{"burst too big", func(c *engine.Config) { c.Burst = 2e9 }, []string{"Burst", "got 2e+09"}},
		{"burst NaN", func(c *engine.Config) { c.Burst = math.NaN() }, []string{"Burst"}},
		{"burst inf", func(c *engine.Config) { c.Burst = math.Inf(1) }, []string{"Burst"}},
		{"burst fraction", func(c *engine.Config) { c.Burst = 1.0005 }, []string{"Burst", "multiple of 0.001", "1.0005"}},
		{"fill too long", func(c *engine.Config) { c.Limit = engine.Every(time.Hour); c.Burst = 9000 }, []string{"Burst/Limit", "366 days"}},
		{"shards not power of two", func(c *engine.Config) { c.Shards = 3 }, []string{"Shards", "power of two", "got 3"}},
		{"shards negative", func(c *engine.Config) { c.Shards = -4 }, []string{"Shards", "got -4"}},
		{"shards too many", func(c *engine.Config) { c.Shards = 1 << 17 }, []string{"Shards", "65536"}},
		{"sweep too short", func(c *engine.Config) { c.SweepInterval = time.Microsecond }, []string{"SweepInterval", "1ms", "got 1µs"}},
		{"max keys negative", func(c *engine.Config) { c.MaxKeys = -1 }, []string{"MaxKeys", "got -1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			e, err := engine.New(cfg)
			if err == nil {
				e.Close()
				t.Fatalf("New(%+v) succeeded", cfg)
			}
			if !errors.Is(err, engine.ErrInvalidConfig) {
				t.Errorf("error %q does not wrap ErrInvalidConfig", err)
			}
			for _, f := range tt.fields {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not mention %q", err, f)
				}
			}
		})
	}
	for _, cfg := range []engine.Config{
		{Limit: 1, Burst: 1},
		{Limit: 1e9, Burst: 1e9},
		{Limit: engine.Every(24 * time.Hour), Burst: 365},
		{Limit: 10, Burst: 1.001, Shards: 1},
		{Limit: 10, Burst: 20, Shards: 65536, SweepInterval: time.Millisecond, MaxKeys: 1},
		{Limit: 1e4, Burst: 1e9, SweepInterval: 17 * time.Second},
	} {
		e, err := engine.New(cfg)
		if err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
			continue
		}
		e.Close()
	}
}

func TestPrecision(t *testing.T) {
	p := newEngine(t, engine.Config{Limit: 1, Burst: 10}).Precision()
	if p.Quantum != 0.001 || p.Tick != time.Nanosecond || p.Horizon < time.Hour {
		t.Errorf("Precision = %+v", p)
	}
	p = newEngine(t, engine.Config{Limit: 1e9, Burst: 1e9}).Precision()
	if p.Tick != 4096*time.Nanosecond || p.Horizon != 1<<36 {
		t.Errorf("Precision at burst 1e9 = %+v", p)
	}
}

// The engine never admits what the exact model denies, and trails it by less
// than the bound documented in package fixedpoint: a quantum plus the larger
// of a quantum and a tick's refill plus 2*(tick-1ns) of refill, and with
// ticks above 1 ns a quantum and a tick's refill more. Shadow protocol: the
// model applies the engine's decisions.
func TestShadowAgainstExactModel(t *testing.T) {
	for _, tt := range []struct {
		rate  engine.Limit
		burst float64
	}{
		{1, 1}, {10, 3}, {0.5, 2}, {7.3, 11.5}, {1000, 10}, {engine.Every(24 * time.Hour), 2},
		{1e6, 1e6}, {1e9, 1e9}, {engine.Limit(math.Pi), 100}, {12345.678, 1e5}, {0.1, 1},
	} {
		t.Run(fmt.Sprintf("rate=%v/burst=%v", float64(tt.rate), tt.burst), func(t *testing.T) {
			e := newEngine(t, engine.Config{Limit: tt.rate, Burst: tt.burst})
			m := newModel(float64(tt.rate), tt.burst)
			tick := e.Precision().Tick
			slack := trailBound(m.rate, int64(tick))
			seed := uint64(len(t.Name()))
			next := func() uint64 { seed = seed*6364136223846793005 + 1442695040888963407; return seed >> 11 }
			fill := tt.burst / float64(tt.rate) * 1e9
			var now int64
			for i := range 20000 {
				switch next() % 8 {
				case 0:
					now += int64(next() % uint64(fill/3+1))
				case 1:
					now -= int64(next() % uint64(fill/5+1)) // out of order
				case 2:
					now += int64(fill) + int64(next()%3) - 1
				default:
					now += int64(next() % uint64(fill/float64(tt.burst)/4+2))
				}
				var n float64
				switch next() % 4 {
				case 0:
					n = float64(next()%uint64(tt.burst*1000+1)) / 1000
				case 1:
					n = 1
				case 2:
					n = math.Min(tt.burst, float64(next()%5)+0.5)
				default:
					n = float64(next()%1000) / 997 // not multiples of 0.001
				}
				d := e.AllowAt(time.Unix(0, now), "k", n)
				c := costOf(n)
				exact := m.at(now)
				if d.Allowed && n > 0 {
					if exact.Cmp(c) < 0 {
						t.Fatalf("op %d at %d ns: engine admitted %v with exact tokens %v", i, now, n, ratF(exact))
					}
					m.take(now, c)
				} else if !d.Allowed {
					limit := new(big.Rat).Add(c, slack)
					if exact.Cmp(limit) >= 0 {
						t.Fatalf("op %d at %d ns: engine denied %v with exact tokens %v (slack %v)", i, now, n, ratF(exact), ratF(slack))
					}
				}
				// The engine's count is below the exact one by less than the slack.
				gap := new(big.Rat).Sub(m.at(now), exactTokens(e.TokensAt(time.Unix(0, now), "k")))
				if gap.Sign() < 0 || gap.Cmp(slack) >= 0 {
					t.Fatalf("op %d at %d ns: exact minus engine = %v, want in [0, %v)", i, now, ratF(gap), ratF(slack))
				}
			}
		})
	}
}

// Over a simulated hour of saturating unit-cost traffic (at every instant,
// take one token until denied) the engine admits at least what an exact
// bucket run on its own admits, minus one token, and never more. Faster rates
// are covered token by token by TestShadowAgainstExactModel.
func TestHourAgainstExactModel(t *testing.T) {
	for _, tt := range []struct {
		rate   engine.Limit
		burst  float64
		period time.Duration
	}{
		{1, 1, 50 * time.Millisecond},
		{10, 20, 40 * time.Millisecond},
		{engine.Limit(math.Pi), 5, 100 * time.Millisecond},
		{33.3, 100, 70 * time.Millisecond},
		{engine.Every(24 * time.Hour), 1, time.Minute},
		{engine.Every(3 * time.Second), 2, 100 * time.Millisecond},
		{engine.Every(7 * time.Millisecond), 3, 333 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("rate=%v/burst=%v", float64(tt.rate), tt.burst), func(t *testing.T) {
			e := newEngine(t, engine.Config{Limit: tt.rate, Burst: tt.burst})
			m := newModel(float64(tt.rate), tt.burst)
			one := big.NewRat(1, 1)
			var got, want int
			for now := time.Duration(0); now <= time.Hour; now += tt.period {
				for e.AllowAt(at(now), "k", 1).Allowed {
					got++
				}
				for m.at(int64(now)).Cmp(one) >= 0 {
					m.take(int64(now), one)
					want++
				}
			}
			if got > want || got < want-1 {
				t.Errorf("admitted %d, exact %d", got, want)
			}
		})
	}
}

// Allow decides a live bucket without decide; it must agree with AllowN(key,
// 1) call for call, count what it decides, and start over after an eviction.
func TestAllowAgreesWithAllowN(t *testing.T) {
	a := newEngine(t, engine.Config{Limit: engine.Every(24 * time.Hour), Burst: 3})
	b := newEngine(t, engine.Config{Limit: engine.Every(24 * time.Hour), Burst: 3})
	for i := range 5 {
		got, want := a.Allow("k"), b.AllowN("k", 1).Allowed
		if got != want || got != (i < 3) {
			t.Fatalf("call %d: Allow = %v, AllowN = %v, want %v", i, got, want, i < 3)
		}
	}
	if s := a.Stats(); s.Allowed != 3 || s.Denied != 2 || s.Live != 1 {
		t.Fatalf("stats after 3 admitted, 2 denied: %+v", s)
	}

	// A bucket that refills within a nanosecond is full again at once; once
	// swept, Allow finds no bucket and creates a new, full one.
	e := newEngine(t, engine.Config{Limit: 1e9, Burst: 1})
	if !e.Allow("k") {
		t.Fatal("new key denied")
	}
	if n := e.SweepAt(time.Now().Add(time.Hour)); n != 1 || e.Len() != 0 {
		t.Fatalf("sweep evicted %d, %d live; want 1, 0", n, e.Len())
	}
	if !e.Allow("k") || e.Len() != 1 {
		t.Fatalf("Allow after eviction: len %d, want a new bucket", e.Len())
	}
}

// Quotas counted in months and years (Envoy's rate-limit units go to YEAR):
// 12 a year and 5 a month, on a virtual clock, refill exactly on schedule.
func TestQuotasPerYearAndMonth(t *testing.T) {
	year := 366 * 24 * time.Hour
	for _, c := range []struct {
		n      float64
		period time.Duration
	}{{12, year}, {5, 31 * 24 * time.Hour}, {1, year}} {
		t.Run(fmt.Sprintf("%v per %v", c.n, c.period), func(t *testing.T) {
			e := newEngine(t, engine.Config{Limit: engine.Limit(c.n / c.period.Seconds()), Burst: c.n})
			if d := e.AllowAt(t0, "tenant", c.n); !d.Allowed {
				t.Fatalf("the first %v: %+v", c.n, d)
			}
			one := time.Duration(float64(c.period) / c.n) // one token's refill
			d := e.AllowAt(t0, "tenant", 1)
			if d.Allowed || d.RetryAfter < one-time.Microsecond || d.RetryAfter > one+time.Microsecond {
				t.Errorf("one more at once: %+v, want denied for %v", d, one)
			}
			if d := e.AllowAt(at(one-time.Second), "tenant", 1); d.Allowed {
				t.Errorf("a second before a token's refill: %+v", d)
			}
			if d := e.AllowAt(at(one+time.Microsecond), "tenant", 1); !d.Allowed {
				t.Errorf("after a token's refill: %+v", d)
			}
			// Within the rounding bound: the float64 rate is a hair off n/period.
			if got := e.TokensAt(at(one+c.period), "tenant"); got < c.n-0.002 || got > c.n {
				t.Errorf("a whole period later: %v tokens, want %v", got, c.n)
			}
		})
	}
}
