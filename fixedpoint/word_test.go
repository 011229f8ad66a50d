package fixedpoint

import (
	"math/rand/v2"
	"testing"
)

func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 10000 {
		l, _, _ := randomLayout(rng)
		ref := rng.Int64N(1<<60) - 1<<59
		// Any tick in the window resolves to itself.
		tick := ref + l.Lead - rng.Int64N(int64(1)<<l.TickBits)
		tokens := rng.Uint64N(l.Capacity + 1)
		w := l.Pack(tick, tokens)
		if w == Tomb {
			t.Fatal("a live word packed to Tomb")
		}
		if got := l.Tokens(w); got != tokens {
			t.Fatalf("Tokens = %d, want %d", got, tokens)
		}
		if got := l.Resolve(w, ref); got != tick {
			t.Fatalf("Resolve(Pack(%d), ref=%d) = %d (T=%d)", tick, ref, got, l.TickBits)
		}
	}
}

func TestResolveEdges(t *testing.T) {
	l := mustLayout(t, 1e9, 1e9) // T = 24, the narrowest tick field
	span := int64(1) << l.TickBits
	for _, ref := range []int64{0, 1, -1, span - 1, span, -span, 1 << 40, -(1 << 40)} {
		top := ref + l.Lead
		for _, tick := range []int64{top, top - 1, top - span + 1, ref, ref - l.Stale} {
			if got := l.Resolve(l.Pack(tick, 5), ref); got != tick {
				t.Errorf("ref=%d: Resolve(%d) = %d", ref, tick, got)
			}
		}
		// Just outside the window a tick resolves later than the truth.
		old := top - span
		if got := l.Resolve(l.Pack(old, 5), ref); got <= old {
			t.Errorf("ref=%d: out-of-window tick %d resolved to %d, not later", ref, old, got)
		}
	}
}

func TestTombIsNotAState(t *testing.T) {
	for _, burst := range []float64{1, 1.023, 1023, 1e9} {
		l := mustLayout(t, burst, 1)
		if l.Tokens(Tomb) <= l.Capacity {
			t.Errorf("burst %v: Tomb's token field %d is a valid count", burst, l.Tokens(Tomb))
		}
	}
}

func TestOrderingOfPackedTokens(t *testing.T) {
	l := mustLayout(t, 100, 10)
	// At one tick, more tokens is a larger word: the token field is the low bits.
	for x := uint64(0); x < l.Capacity; x += 997 {
		if l.Pack(42, x) >= l.Pack(42, x+1) {
			t.Fatalf("Pack(42,%d) >= Pack(42,%d)", x, x+1)
		}
	}
}
