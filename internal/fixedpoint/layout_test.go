package fixedpoint

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

func mustLayout(t testing.TB, burst, rate float64) *Layout {
	t.Helper()
	capacity, ok := QuantizeExact(burst)
	if !ok {
		t.Fatalf("burst %v is not a multiple of a quantum", burst)
	}
	l, err := NewLayout(capacity, rate)
	if err != nil {
		t.Fatalf("NewLayout(burst=%v, rate=%v): %v", burst, rate, err)
	}
	return l
}

// TestLayoutTable pins the table in doc.go.
func TestLayoutTable(t *testing.T) {
	for _, tt := range []struct {
		burst          float64
		tokenBits      uint
		tickBits       uint
		tick           time.Duration
		horizonSeconds float64
	}{
		{1, 10, 54, 1, 208.5 * 86400},
		{100, 17, 47, 1, 39.09 * 3600},
		{1e5, 27, 37, 1, 2.29 * 60},
		{1e6, 30, 34, 4, 68.7},
		{1e9, 40, 24, 4096, 68.7},
	} {
		t.Run(fmt.Sprintf("burst=%v", tt.burst), func(t *testing.T) {
			l := mustLayout(t, tt.burst, 1e6)
			if l.tokenBits != tt.tokenBits || l.tickBits != tt.tickBits || time.Duration(l.TickNanos()) != tt.tick {
				t.Errorf("W=%d T=%d tick=%v, want W=%d T=%d tick=%v", l.tokenBits, l.tickBits, time.Duration(l.TickNanos()),
					tt.tokenBits, tt.tickBits, tt.tick)
			}
			h := float64(l.HorizonNanos()) / 1e9
			if math.Abs(h-tt.horizonSeconds)/tt.horizonSeconds > 0.005 {
				t.Errorf("horizon %.4g s, want %.4g s", h, tt.horizonSeconds)
			}
			if l.HorizonNanos() < 1<<minHorizonShift {
				t.Errorf("horizon %d ns below the minimum", l.HorizonNanos())
			}
		})
	}
}

// exactRate returns the layout's refill per tick as an exact rational, and
// the configured rate's.
func exactRate(l *Layout, rate float64) (engine, configured *big.Rat) {
	den := new(big.Int).Lsh(big.NewInt(five6), l.rateShift)
	engine = new(big.Rat).SetFrac(new(big.Int).SetUint64(l.rateNum), den)
	configured = new(big.Rat).SetFloat64(rate)
	configured.Mul(configured, big.NewRat(QuantaPerToken*l.TickNanos(), 1e9))
	return engine, configured
}

func TestRateIsExactOrRoundedDown(t *testing.T) {
	year := 366 * 86400.0
	rates := []float64{1 / year, 12 / year, 5 / (31 * 86400.0), 1.0 / 86400, 1e-3, 0.1, 0.5, 1, 3, 10, 7.3, 1000, 12345.678, 1e6, 1e9, math.Pi}
	for _, burst := range []float64{1, 1000, 1e6, 1e9} {
		for _, r := range rates {
			if burst/r > 366*86400 {
				continue
			}
			l := mustLayout(t, burst, r)
			got, want := exactRate(l, r)
			switch c := got.Cmp(want); {
			case c > 0:
				t.Errorf("burst=%v rate=%v: layout rate %v above configured %v", burst, r, got, want)
			case c < 0:
				// The shortfall must be below one part in 2^50.
				diff := new(big.Rat).Sub(want, got)
				diff.Quo(diff, want)
				if diff.Cmp(big.NewRat(1, 1<<50)) > 0 {
					t.Errorf("burst=%v rate=%v: rounded by %v relative", burst, r, diff.FloatString(20))
				}
			}
		}
	}
	for _, r := range []float64{1, 10, 0.5, 1e9, 1000, 64} {
		if got, want := exactRate(mustLayout(t, 10, r), r); got.Cmp(want) != 0 {
			t.Errorf("rate %v should be represented exactly", r)
		}
	}
	// The slowest rates, with the bursts they allow, are exact too.
	for _, r := range []float64{1 / year, 12 / year, 5 / (31 * 86400.0), 1 / (7 * 86400.0)} {
		if got, want := exactRate(mustLayout(t, 1, r), r); got.Cmp(want) != 0 {
			t.Errorf("rate %v with burst 1 should be represented exactly", r)
		}
	}
}

// grid returns floor(tick * rate) for the layout's exact rate.
func grid(l *Layout, tick int64) *big.Int {
	r, _ := exactRate(l, 1)
	x := new(big.Rat).Mul(new(big.Rat).SetInt64(tick), r)
	q := new(big.Int).Div(x.Num(), x.Denom()) // Euclidean: floor for positive denominators
	return q
}

func randomLayout(rng *rand.Rand) (*Layout, float64, float64) {
	for {
		burst := math.Round(math.Exp(rng.Float64()*math.Log(1e9))*1000) / 1000
		burst = max(1, burst)
		slowest := 1.0 / (366 * 86400) // one token a year
		rate := math.Exp(math.Log(slowest) + rng.Float64()*(math.Log(1e9)-math.Log(slowest)))
		if rng.IntN(3) == 0 {
			rate = math.Round(rate) + 1 // integer rates are the common case
		}
		if burst/rate > 366*86400 || rate > 1e9 {
			continue
		}
		capacity, _ := QuantizeExact(burst)
		l, err := NewLayout(capacity, rate)
		if err != nil {
			panic(fmt.Sprintf("burst=%v rate=%v: %v", burst, rate, err))
		}
		return l, burst, rate
	}
}

// Credit has a fast path (both grid values fit 64 bits after the shift) and
// a general one; both must match the exact grid, and the test checks that it
// reached both often.
func TestCreditMatchesGrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fast, general := 0, 0
	for range 5000 {
		l, burst, rate := randomLayout(rng)
		from := rng.Int64N(1<<61) - 1<<60
		switch rng.IntN(4) {
		case 0:
			from = rng.Int64N(2000) - 1000
		case 1: // every magnitude, where the fast path starts and stops fitting
			from = rng.Int64N(1 << rng.IntN(62))
		}
		elapsed := rng.Uint64N(l.fillTicks + 1)
		if _, fits := mul64(uint64(from)+elapsed, l.rateNum).shrFits(l.rateShift); from >= 0 && fits {
			fast++
		} else {
			general++
		}
		got := l.Credit(from, elapsed)
		want := new(big.Int).Sub(grid(l, from+int64(elapsed)), grid(l, from))
		if !want.IsUint64() || got != want.Uint64() {
			t.Fatalf("burst=%v rate=%v: Credit(%d, %d) = %d, want %v", burst, rate, from, elapsed, got, want)
		}
	}
	if fast < 500 || general < 500 {
		t.Errorf("paths reached: fast %d, general %d; want both at least 500", fast, general)
	}
}

func TestCreditTelescopes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		l, _, _ := randomLayout(rng)
		from := rng.Int64N(1<<60) - 1<<59
		total := rng.Uint64N(l.fillTicks + 1)
		split := rng.Uint64N(total + 1)
		a, b := l.Credit(from, split), l.Credit(from+int64(split), total-split)
		if a+b != l.Credit(from, total) {
			t.Fatalf("Credit(%d,%d)+Credit(%d,%d) = %d, want %d", from, split, from+int64(split), total-split, a+b, l.Credit(from, total))
		}
	}
}

func TestTicksUntilIsTheFirstAdmittingTick(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		l, _, _ := randomLayout(rng)
		at := rng.Int64N(1<<61) - 1<<60
		need := 1 + rng.Uint64N(l.capacity)
		have := rng.Uint64N(need)
		k := l.TicksUntil(at, have, need)
		if k > l.fillTicks {
			t.Fatalf("TicksUntil = %d beyond FillTicks %d", k, l.fillTicks)
		}
		if have+l.Credit(at, k) < need {
			t.Fatalf("after %d ticks only %d of %d quanta", k, have+l.Credit(at, k), need)
		}
		if k > 0 && have+l.Credit(at, k-1) >= need {
			t.Fatalf("%d ticks already suffice, reported %d", k-1, k)
		}
	}
}

func TestBoundary(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 3000 {
		l, _, _ := randomLayout(rng)
		at := rng.Int64N(1<<61) - 1<<60
		b := l.Boundary(at)
		if b < at || !l.phase(b).isZero() && grid(l, b).Cmp(grid(l, at)) == 0 && b != at {
			t.Fatalf("Boundary(%d) = %d", at, b)
		}
		// b is on a quantum: the grid increases exactly at b, or at is on one.
		if b != at && grid(l, b).Cmp(grid(l, b-1)) <= 0 {
			t.Fatalf("Boundary(%d) = %d is not where the grid steps", at, b)
		}
		if b-at > int64(l.ticksFor(1, u128{})) {
			t.Fatalf("Boundary(%d) = %d, more than a quantum away", at, b)
		}
	}
	l := mustLayout(t, 10, 1)
	if l.Boundary(0) != 0 || l.Boundary(1) != 1_000_000 || l.Boundary(1_000_000) != 1_000_000 {
		t.Errorf("rate 1/s: Boundary(0,1,1e6) = %d,%d,%d; want 0,1e6,1e6", l.Boundary(0), l.Boundary(1), l.Boundary(1_000_000))
	}
}

func TestNewLayoutRejects(t *testing.T) {
	for _, tt := range []struct {
		capacity uint64
		rate     float64
	}{
		{0, 1}, {1000, 0}, {1000, -1}, {1000, math.NaN()}, {1000, math.Inf(1)},
		{1 << 40, 1}, // token field wider than 40 bits
		{1000, 1e-30},
	} {
		if _, err := NewLayout(tt.capacity, tt.rate); err == nil {
			t.Errorf("NewLayout(%d, %v) succeeded", tt.capacity, tt.rate)
		}
	}
}

// A bucket stored full stays at its stored tick for any time not later:
// Boundary is not idempotent (the tick where the grid steps is rarely on a
// whole quantum), so taking it again would move the bucket a quantum later on
// every call made before that tick.
func TestStoredFullTickIsKept(t *testing.T) {
	l := mustLayout(t, 178, 108) // 0.000108 quanta per ns: steps at 9260, 18519, ...
	if b := l.Boundary(1); b != 9260 || l.Boundary(b) != 18519 {
		t.Fatalf("Boundary(1) = %d, Boundary of that = %d; want 9260, 18519", b, l.Boundary(b))
	}
	w, _ := l.Pack(0, l.FullTick(1, 0), l.capacity)
	for _, now := range []Instant{{0, 0}, {1, 1}, {9259, 9259}} {
		if _, at, tokens := l.Advance(w, 0, now); at != 9260 || tokens != l.capacity {
			t.Errorf("Advance(full at 9260, now %v) = at %d, %d quanta; want 9260, full", now, at, tokens)
		}
	}
	// From the stored tick on, the grid is past its quantum: the next one.
	for _, now := range []Instant{{9259, 9260}, {9260, 9260}, {9260, 9261}} {
		if _, at, _ := l.Advance(w, 0, now); at != 18519 {
			t.Errorf("Advance(full at 9260, now %v) = at %d, want the next boundary 18519", now, at)
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 3000 {
		l, _, _ := randomLayout(rng)
		x := rng.Int64N(1<<40) - 1<<39
		b := l.FullTick(x, math.MinInt64)
		if b != l.Boundary(x) || l.FullTick(b, b) != l.Boundary(b) {
			t.Fatalf("FullTick(%d) = %d, FullTick of that %d; want the boundaries", x, b, l.FullTick(b, b))
		}
		if b > x && (l.FullTick(x, b) != b || l.FullTick(b-1, b) != b) {
			t.Fatalf("FullTick(%d or %d, known %d) = %d, %d; want it kept", x, b-1, b, l.FullTick(x, b), l.FullTick(b-1, b))
		}
		// Kept only where it is conservative: a time before b is credited
		// no more than b's grid count.
		if b > x && grid(l, b).Cmp(grid(l, b-1)) <= 0 {
			t.Fatalf("Boundary(%d) = %d is not where the grid steps", x, b)
		}
		w, _ := l.Pack(b, b, l.capacity)
		if _, at, _ := l.Advance(w, b, Instant{b - 1, b - 1}); at != b {
			t.Fatalf("Advance moved a bucket stored full at %d to %d for a time before it", b, at)
		}
	}
}
