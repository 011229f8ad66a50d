package fixedpoint

import (
	"math/rand/v2"
	"testing"
)

// Every tick in an epoch's span packs and resolves to itself, with every
// token count; ticks outside the span do not pack.
func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 10000 {
		l, _, _ := randomLayout(rng)
		span := int64(1) << l.tickBits
		ns := rng.Int64N(maxTimeNanos) // the clamped range, either side
		if rng.IntN(2) == 0 {
			ns = -ns
		}
		tick := ns >> l.tickShift
		base := l.Base(l.EpochOf(tick))
		if off := tick - base; off < 0 || off >= span/2 {
			t.Fatalf("EpochOf(%d): base %d leaves it %d ticks in, want the first half of %d", tick, base, off, span)
		}
		// Any tick of the span from the base, for the epoch's whole life.
		later := base + rng.Int64N(span)
		tokens := rng.Uint64N(l.capacity + 1)
		w, ok := l.Pack(base, later, tokens)
		if !ok || w == Tomb {
			t.Fatalf("Pack(%d, %d) in the span failed (T=%d)", base, later, l.tickBits)
		}
		if got := l.Tokens(w); got != tokens {
			t.Fatalf("Tokens = %d, want %d", got, tokens)
		}
		if got := l.Resolve(w, base); got != later {
			t.Fatalf("Resolve(Pack(%d), base %d) = %d (T=%d)", later, base, got, l.tickBits)
		}
		for _, out := range []int64{base - 1, base + span, base + span + rng.Int64N(span)} {
			if w, ok := l.Pack(base, out, tokens); ok || w != Tomb {
				t.Fatalf("Pack(base %d, tick %d) outside the span gave %#x, %v", base, out, w, ok)
			}
		}
	}
}

// The narrowest tick field, at the extremes of the clamped range.
func TestPackEdges(t *testing.T) {
	l := mustLayout(t, 1e9, 1e9) // T = 24
	span := int64(1) << l.tickBits
	for _, tick := range []int64{0, 1, -1, span - 1, span, -span, 1 << 40, -(1 << 40), maxTimeNanos >> l.tickShift, -maxTimeNanos >> l.tickShift} {
		e := l.EpochOf(tick)
		base := l.Base(e)
		for _, at := range []int64{tick, base, base + span - 1} {
			w, ok := l.Pack(base, at, 5)
			if !ok || l.Resolve(w, base) != at {
				t.Errorf("epoch %d: Pack/Resolve(%d) = %d, %v", e, at, l.Resolve(w, base), ok)
			}
		}
	}
}

func TestTombIsNotAState(t *testing.T) {
	for _, burst := range []float64{1, 1.023, 1023, 1e9} {
		l := mustLayout(t, burst, 1)
		if l.Tokens(Tomb) <= l.capacity {
			t.Errorf("burst %v: Tomb's token field %d is a valid count", burst, l.Tokens(Tomb))
		}
	}
}

func TestOrderingOfPackedTokens(t *testing.T) {
	l := mustLayout(t, 100, 10)
	// At one tick, more tokens is a larger word: the token field is the low bits.
	for x := uint64(0); x < l.capacity; x += 997 {
		a, _ := l.Pack(0, 42, x)
		b, _ := l.Pack(0, 42, x+1)
		if a >= b {
			t.Fatalf("Pack(42,%d) >= Pack(42,%d)", x, x+1)
		}
	}
}

// A take whose state does not fit its epoch is reported, not packed.
func TestTakePastTheSpan(t *testing.T) {
	l := mustLayout(t, 1e9, 1e9)
	span := int64(1) << l.tickBits
	w, _ := l.Pack(0, 0, 0)
	if s := l.Take(w, 0, Instant{span - 1, span - 1}, 1000); !s.Allowed || !s.Write() || s.NeedsEpoch(1000) {
		t.Errorf("take at the span's last tick: %+v", s)
	}
	s := l.Take(w, 0, Instant{span, span}, 1000)
	if !s.Allowed || s.Write() || !s.NeedsEpoch(1000) || s.At != span {
		t.Errorf("take past the span: %+v, want allowed, needing a later epoch, at %d", s, span)
	}
	if d := l.Take(w, 0, Instant{span, span}, l.capacity+0); !d.Allowed && d.NeedsEpoch(l.capacity) {
		t.Errorf("a denial needs no epoch: %+v", d)
	}
	if p := l.Take(w, 0, Instant{span, span}, 0); p.Write() || p.NeedsEpoch(0) || !p.Allowed {
		t.Errorf("a peek past the span: %+v, want allowed, nothing written", p)
	}
}
