package engine_test

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// tokensNear fails t unless key holds want tokens at d, or up to one quantum
// and a tick's refill fewer: what a change may cost (the engine rounds
// against the caller, never for it).
func tokensNear(t *testing.T, e *engine.Engine, d time.Duration, key string, want float64) {
	t.Helper()
	got := e.TokensAt(at(d), key)
	loss := 0.001 + 2*float64(e.Limit())*e.Precision().Tick.Seconds()
	if got > want || got < want-loss-1e-9 {
		t.Errorf("TokensAt(%v, %q) = %v, want %v", d, key, got, want)
	}
}

func TestSetLimitKeepsTokens(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 100})
	e.AllowAt(at(0), "k", 50)
	if err := e.SetLimitAt(at(time.Second), 1); err != nil {
		t.Fatal(err)
	}
	if e.Limit() != 1 || e.Burst() != 100 {
		t.Fatalf("Limit, Burst = %v, %v; want 1, 100", e.Limit(), e.Burst())
	}
	tokensNear(t, e, time.Second, "k", 60)     // refilled at 10/s until the change
	tokensNear(t, e, 11*time.Second, "k", 70)  // then at 1/s
	tokensNear(t, e, 41*time.Second, "k", 100) // full
	// A call before the change counts as at it, like any earlier time.
	if d := e.AllowAt(at(500*time.Millisecond), "k", 60); !d.Allowed || d.Remaining != 0 {
		t.Errorf("take of 60 at 0.5s after a change at 1s = %+v, want allowed, 0 left", d)
	}
	if d := e.AllowAt(at(3*time.Second), "k", 3); d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("take of 3 at 3s = %+v, want denied, retry after 1s at 1/s", d)
	}
}

func TestSetBurstLowerCaps(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 100})
	e.AllowAt(at(0), "full", 0.001)
	e.AllowAt(at(0), "low", 95)
	if err := e.SetBurstAt(at(time.Second), 20); err != nil {
		t.Fatal(err)
	}
	tokensNear(t, e, time.Second, "full", 20)
	tokensNear(t, e, time.Second, "low", 15)
	tokensNear(t, e, 1500*time.Millisecond, "low", 20)
	tokensNear(t, e, time.Second, "new", 20)
	if d := e.AllowAt(at(2*time.Second), "new", 21); d.Allowed || d.RetryAfter != engine.InfDuration {
		t.Errorf("take of 21 with burst 20 = %+v, want never", d)
	}
}

// A raise keeps every key's tokens, keys without a bucket included: they
// hold the old burst at the change and refill to the new one at the new
// rate. Across a change of the packed word's layout (burst 100 to 1e9 moves
// the tick from 1 ns to 4096 ns).
func TestSetBurstRaiseKeepsTokens(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 100})
	tick := e.Precision().Tick
	e.AllowAt(at(0), "half", 50)
	e.AllowAt(at(0), "full", 0.001)
	if err := e.SetAt(at(time.Second), 1000, 1e9); err != nil {
		t.Fatal(err)
	}
	if p := e.Precision(); p.Tick == tick {
		t.Fatalf("tick %v unchanged: the test does not cross layouts", tick)
	}
	tokensNear(t, e, time.Second, "half", 60)
	tokensNear(t, e, time.Second, "full", 100)
	tokensNear(t, e, time.Second, "never-seen", 100)
	tokensNear(t, e, 2*time.Second, "half", 1060)
	tokensNear(t, e, 2*time.Second, "never-seen", 1100)
	tokensNear(t, e, 2*time.Second, "full", 1100)
	// A key idle for the whole new fill time is full at the new burst.
	full := time.Second + time.Duration(1e6)*time.Second
	if got := e.TokensAt(at(full), "half"); got != 1e9 {
		t.Errorf("TokensAt a fill time after the raise = %v, want 1e9", got)
	}
	// And back down: capped again.
	if err := e.SetBurstAt(at(3*time.Second), 200); err != nil {
		t.Fatal(err)
	}
	tokensNear(t, e, 3*time.Second, "half", 200)
	tokensNear(t, e, 3*time.Second, "never-seen", 200)
}

// The flip-flop of a deploy rolled back: lowering the burst and raising it
// again gives no client the high burst back at once.
func TestSetBurstDownAndUpRefillsAtTheRate(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 100})
	if err := e.SetBurstAt(at(0), 1); err != nil {
		t.Fatal(err)
	}
	e.SweepAt(at(time.Second)) // nothing to evict; stays so after the raise
	if err := e.SetBurstAt(at(2*time.Second), 100); err != nil {
		t.Fatal(err)
	}
	tokensNear(t, e, 2*time.Second, "anyone", 1)
	tokensNear(t, e, 12*time.Second, "anyone", 11)
	if d := e.AllowAt(at(12*time.Second), "anyone", 12); d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("take of 12 at 12s = %+v, want denied for 1s", d)
	}
	// The denial made "anyone" a bucket, full at 101s with every key
	// without one; "k" is full at 102s. A sweep drops each once it is full.
	e.AllowAt(at(12*time.Second), "k", 1)
	if n := e.SweepAt(at(101500 * time.Millisecond)); n != 1 {
		t.Errorf("SweepAt(101.5s) evicted %d buckets, want 1", n)
	}
	if n := e.SweepAt(at(102500 * time.Millisecond)); n != 1 {
		t.Errorf("SweepAt(102.5s) evicted %d buckets, want 1", n)
	}
	tokensNear(t, e, 102*time.Second, "k", 100)
}

// A bucket whose last update is later than the change's time changes at
// that update.
func TestSetBeforeTheLastUpdate(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 100})
	e.AllowAt(at(5*time.Second), "k", 100)
	if err := e.SetLimitAt(at(time.Second), 1); err != nil {
		t.Fatal(err)
	}
	tokensNear(t, e, 5*time.Second, "k", 0)
	tokensNear(t, e, 6*time.Second, "k", 1)
}

func TestSetBadValuesChangeNothing(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 100})
	e.AllowAt(at(0), "k", 40)
	p := e.Precision()
	year := 366 * 24 * time.Hour
	for _, tt := range []struct {
		name  string
		set   func() error
		field string
	}{
		{"limit=0", func() error { return e.SetLimitAt(at(time.Second), 0) }, "Limit"},
		{"limit=-1", func() error { return e.SetLimitAt(at(time.Second), -1) }, "Limit"},
		{"limit=NaN", func() error { return e.SetLimitAt(at(time.Second), engine.Limit(math.NaN())) }, "Limit"},
		{"limit=Inf", func() error { return e.SetLimit(engine.Limit(math.Inf(1))) }, "Limit"},
		{"limit=2e9", func() error { return e.SetLimit(2e9) }, "Limit"},
		{"limit=below a year", func() error { return e.SetLimit(engine.Every(2 * year)) }, "Limit"},
		{"burst=0", func() error { return e.SetBurstAt(at(time.Second), 0) }, "Burst"},
		{"burst=NaN", func() error { return e.SetBurst(math.NaN()) }, "Burst"},
		{"burst=Inf", func() error { return e.SetBurst(math.Inf(1)) }, "Burst"},
		{"burst=2e9", func() error { return e.SetBurst(2e9) }, "Burst"},
		{"burst=0.0005 steps", func() error { return e.SetBurst(10.0005) }, "Burst"},
		{"fill over a year", func() error { return e.SetAt(at(time.Second), engine.Every(year), 2) }, "Burst/Limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.set()
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err = %v, want ErrInvalidConfig naming %s", err, tt.field)
			}
			if e.Limit() != 10 || e.Burst() != 100 || e.Precision() != p {
				t.Fatalf("after a refused change: Limit %v, Burst %v, Precision %+v", e.Limit(), e.Burst(), e.Precision())
			}
			tokensNear(t, e, 2*time.Second, "k", 80)
		})
	}
}

// setModel is the exact model of an engine whose limit changes: one model
// bucket per key, and blank, the bucket of every key not seen yet, all
// carried through each change alike.
type setModel struct {
	blank *model
	keys  map[string]*model
}

func (s *setModel) of(key string) *model {
	m, ok := s.keys[key]
	if !ok {
		c := *s.blank
		m = &c
		s.keys[key] = m
	}
	return m
}

// change applies SetAt(ns, rate, burst) to every bucket: its tokens at ns (or
// at its last update, if later), capped at burst, from then on at rate.
func (s *setModel) change(ns int64, rate, burst float64) {
	for _, m := range append([]*model{s.blank}, mapValues(s.keys)...) {
		tokens := m.at(ns)
		nb := new(big.Rat).SetFloat64(burst)
		if tokens.Cmp(nb) > 0 {
			tokens.Set(nb)
		}
		if !m.seen || ns > m.last {
			m.last = ns
		}
		m.seen, m.tokens = true, tokens
		m.rate, m.burst = new(big.Rat).SetFloat64(rate), nb
	}
}

func mapValues(m map[string]*model) []*model {
	var out []*model
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// Random takes on a few keys, with clock moves forward and back, and changes
// of rate and burst across layouts: the engine never admits what the exact
// model denies, never holds more than it, and trails it by less than the
// documented bound plus, per change since the key was last full, a quantum
// and a tick's refill at the old and at the new rate.
func TestSetAgainstExactModel(t *testing.T) {
	configs := []struct {
		rate  engine.Limit
		burst float64
	}{{10, 3}, {1000, 50}, {0.5, 2}, {7.3, 1e5}, {1e4, 1e6}, {engine.Every(time.Hour), 5}, {3, 3}}
	for seed := range uint64(14) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			cfg := configs[seed%uint64(len(configs))]
			e := newEngine(t, engine.Config{Limit: cfg.rate, Burst: cfg.burst})
			m := &setModel{blank: newModel(float64(cfg.rate), cfg.burst), keys: map[string]*model{}}
			next := func() uint64 { seed = seed*6364136223846793005 + 1442695040888963407; return seed >> 11 }
			tick := int64(e.Precision().Tick)
			base := trailBound(m.blank.rate, tick)
			q := big.NewRat(1, 1000)
			slack := map[string]*big.Rat{}
			slackOf := func(k string) *big.Rat {
				if s, ok := slack[k]; ok {
					return s
				}
				return base
			}
			var now int64
			for i := range 6000 {
				fill := cfg.burst / float64(cfg.rate) * 1e9
				switch next() % 8 {
				case 0:
					now += int64(next() % uint64(fill/3+1))
				case 1:
					now -= int64(next() % uint64(fill/5+1))
				default:
					now += int64(next() % uint64(fill/cfg.burst/4+2))
				}
				if next()%150 == 0 {
					old := m.blank.rate
					oldTick := tick
					cfg = configs[next()%uint64(len(configs))]
					if err := e.SetAt(time.Unix(0, now), cfg.rate, cfg.burst); err != nil {
						t.Fatal(err)
					}
					m.change(now, float64(cfg.rate), cfg.burst)
					tick = int64(e.Precision().Tick)
					base = trailBound(m.blank.rate, tick)
					// The change's own loss: a quantum, two ticks' refill
					// at the new rate, and at the new rate the refill of
					// a quantum and two ticks at the old one (a bucket
					// found full is stored at the old grid's next quantum).
					loss := new(big.Rat).Add(q, new(big.Rat).Mul(m.blank.rate, big.NewRat(2*tick, 1e9)))
					late := new(big.Rat).Quo(q, old)
					late.Add(late, big.NewRat(2*oldTick, 1e9))
					loss.Add(loss, late.Mul(late, m.blank.rate))
					for _, k := range []string{"a", "b", "c", "d", ""} {
						s := new(big.Rat).Add(slackOf(k), loss)
						slack[k] = s.Add(s, base)
					}
					continue
				}
				key := string(rune('a' + next()%4))
				n := float64(next()%uint64(cfg.burst*1000+1)) / 1000
				if next()%2 == 0 {
					n = 1
				}
				if n > cfg.burst {
					n = cfg.burst
				}
				bm := m.of(key)
				if _, seen := slack[key]; !seen {
					slack[key] = slackOf("") // a new key starts from the blank bucket
				}
				d := e.AllowAt(time.Unix(0, now), key, n)
				c := costOf(n)
				exact := bm.at(now)
				where := func() string {
					return fmt.Sprintf("op %d at %d ns, key %s, rate %v burst %v: %+v, exact %v", i, now, key, float64(cfg.rate), cfg.burst, d, ratF(exact))
				}
				if d.Allowed && n > 0 {
					if exact.Cmp(c) < 0 {
						t.Fatalf("admitted %v: %s", n, where())
					}
					bm.take(now, c)
				} else if !d.Allowed && exact.Cmp(new(big.Rat).Add(c, slackOf(key))) >= 0 {
					t.Fatalf("denied %v with slack %v: %s", n, ratF(slackOf(key)), where())
				}
				got := exactTokens(e.TokensAt(time.Unix(0, now), key))
				gap := new(big.Rat).Sub(bm.at(now), got)
				if gap.Sign() < 0 || gap.Cmp(slackOf(key)) >= 0 {
					t.Fatalf("exact minus engine = %v, want in [0, %v): %s", ratF(gap), ratF(slackOf(key)), where())
				}
				if got.Cmp(bm.burst) == 0 {
					slack[key] = base // full in both: nothing trails
				}
			}
		})
	}
}

// With a frozen clock no change of limit may add a token: each key holds at
// most the burst it started with, whatever bursts (and layouts) SetAt flips
// between while takes, sweeps and reads race it, and at least the smallest
// burst a change capped it at. A double lift, a rewrite that lost a take, or
// a generation read stale would admit more, or lose tokens.
func TestSetRacingTakesAndSweepsConcurrent(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 5, Burst: 10, Shards: 4})
	const keys = 16
	bursts := []float64{3, 1e6, 20, 10, 1e9, 7}
	var admitted [keys]atomic.Int64
	var wg sync.WaitGroup
	var done atomic.Bool
	for c := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for !done.Load() {
				k := rng.IntN(keys)
				if e.AllowAt(t0, fmt.Sprint("key-", k), 1).Allowed {
					admitted[k].Add(1)
				}
				if rng.IntN(8) == 0 {
					if got := e.TokensAt(t0, fmt.Sprint("key-", k)); got < 0 || got > 10 {
						t.Errorf("TokensAt = %v at a frozen clock, outside [0, 10]", got)
					}
				}
			}
		})
	}
	wg.Go(func() {
		for !done.Load() {
			e.SweepAt(t0)
			runtime.Gosched()
		}
	})
	start := time.Now()
	for i := 0; i < 300 && time.Since(start) < 2*time.Second; i++ {
		if err := e.SetAt(t0, engine.Limit(100*(1+i%3)), bursts[i%len(bursts)]); err != nil {
			t.Error(err)
		}
		runtime.Gosched()
	}
	done.Store(true)
	wg.Wait()
	for k := range keys {
		key := fmt.Sprint("key-", k)
		for e.AllowAt(t0, key, 1).Allowed {
			admitted[k].Add(1)
		}
		if got := admitted[k].Load(); got > 10 || got < 3 {
			t.Errorf("%s: admitted %d tokens at a frozen clock, want 3 to 10", key, got)
		}
	}
}

// A take of TakeAll given back after a change of limit returns the take
// less the refill since it, at the faster of the two rates; never above the
// new burst; and nothing across two changes (the refill between them is not
// known). Take at 0 of 30 from 100 at 10/s, change at 1s (80 tokens then).
func TestGiveBackAcrossSetAt(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(e *engine.Engine) error
		twice  bool
		want   float64
	}{
		{"rate", func(e *engine.Engine) error { return e.SetLimitAt(at(time.Second), 1) }, false, 100},
		{"burst down", func(e *engine.Engine) error { return e.SetBurstAt(at(time.Second), 50) }, false, 50},
		{"rate up, other layout: the faster rate covers the take", func(e *engine.Engine) error { return e.SetAt(at(time.Second), 1000, 1e9) }, false, 80},
		{"two changes", func(e *engine.Engine) error { return e.SetLimitAt(at(time.Second), 1) }, true, 80},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, engine.Config{Limit: 10, Burst: 100})
			d, h := e.HoldAt(at(0), "k", 30)
			if !d.Allowed || d.Remaining != 70 {
				t.Fatalf("HoldAt = %+v, want allowed, 70 left", d)
			}
			if err := tt.change(e); err != nil {
				t.Fatal(err)
			}
			if tt.twice {
				if err := e.SetLimitAt(at(time.Second), 2); err != nil {
					t.Fatal(err)
				}
			}
			e.GiveBack(h)
			if got := e.TokensAt(at(time.Second), "k"); got != tt.want {
				t.Errorf("after the give-back: %v tokens, want %v", got, tt.want)
			}
		})
	}
}

// An attacker who floods new keys right after a raise of the burst gets no
// key the new burst: the keys that find room hold what every key without a
// bucket holds (5 at the raise, 6 a second later at 1/s), and the rest share
// the overflow bucket, made the same way. 1,000 new keys: 10 × 1 + 6.
func TestSetRaiseThenFloodOfNewKeys(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 5, MaxKeys: 10})
	if err := e.SetBurstAt(at(time.Second), 100); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for i := range 1000 {
		if e.AllowAt(at(2*time.Second), fmt.Sprint("flood-", i), 1).Allowed {
			admitted++
		}
	}
	if admitted != 16 {
		t.Errorf("a flood of 1,000 new keys after the raise admitted %d, want 16", admitted)
	}
	if got := e.TokensAt(at(2*time.Second), "flood-0"); got != 5 {
		t.Errorf("a flooding key holds %v, want 5", got)
	}
}

// A call that loaded the limit before a change and looks the key up after a
// sweep evicted it at the new burst reports the key as the new limit has it.
// The key never holds more than 3 tokens after its take; the old limit's
// idea of a key without a bucket is 8. (A peek preempted across SetAt and
// SweepAt saw 8 in the linearizability test.)
func TestCallAcrossSetAndEvictionSeesTheNewLimit(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 8})
	e.AllowAt(at(0), "k", 4)
	before := e.Generation()
	if err := e.SetBurstAt(at(0), 3); err != nil {
		t.Fatal(err)
	}
	if n := e.SweepAt(at(0)); n != 1 {
		t.Fatalf("SweepAt evicted %d buckets, want 1 (k, full at the new burst)", n)
	}
	if d := e.PeekIn(before, at(0), "k"); d.Remaining != 3 || d.ResetAfter != 0 {
		t.Errorf("peek in the old limit after the eviction = %+v, want 3 left, full", d)
	}
	if got := e.TokensIn(before, at(0), "k"); got != 3 {
		t.Errorf("TokensAt in the old limit after the eviction = %v, want 3", got)
	}
}

// CheckLimit refuses exactly what New and SetAt refuse, with their error.
func TestCheckLimitAgreesWithNewAndSetAt(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
	limits := []engine.Limit{0, -1, engine.Limit(math.NaN()), engine.Limit(math.Inf(1)), 1.0 / 31622400, 1.0 / 31622401, 1, 1e9, 1e9 + 1}
	bursts := []float64{0, 0.999, 1, 1.0005, 12, 1e9, 1e9 + 1, math.NaN(), math.Inf(1)}
	for _, l := range limits {
		for _, b := range bursts {
			check := engine.CheckLimit(l, b)
			_, newErr := engine.New(engine.Config{Limit: l, Burst: b, SweepInterval: -1})
			setErr := e.SetAt(at(0), l, b)
			if fmt.Sprint(check) != fmt.Sprint(newErr) || fmt.Sprint(check) != fmt.Sprint(setErr) {
				t.Errorf("Limit %v, Burst %v: CheckLimit %v, New %v, SetAt %v", l, b, check, newErr, setErr)
			}
			if check != nil && !errors.Is(check, engine.ErrInvalidConfig) {
				t.Errorf("Limit %v, Burst %v: %v does not wrap ErrInvalidConfig", l, b, check)
			}
		}
	}
}

// CheckLimit reports a problem per field at fault, each a *LimitError that
// names the field, so that a caller can name it its own way.
func TestCheckLimitReportsEveryField(t *testing.T) {
	for _, tc := range []struct {
		limit  engine.Limit
		burst  float64
		fields []string
	}{
		{0, 0.5, []string{"Limit", "Burst"}},
		{2e9, 1, []string{"Limit"}},
		{1, 1.0005, []string{"Burst"}},
		{1, 3.2e7, []string{"Burst/Limit"}},
		{10, 20, nil},
	} {
		err := engine.CheckLimit(tc.limit, tc.burst)
		var fields []string
		for _, le := range engine.LimitErrors(err) {
			fields = append(fields, le.Field)
			if !errors.Is(le, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), le.Must) {
				t.Errorf("CheckLimit(%v, %v): %q in %v", tc.limit, tc.burst, le, err)
			}
		}
		if fmt.Sprint(fields) != fmt.Sprint(tc.fields) || (err == nil) != (tc.fields == nil) {
			t.Errorf("CheckLimit(%v, %v) = %v: fields %v, want %v", tc.limit, tc.burst, err, fields, tc.fields)
		}
	}
}
