package fuzz

import (
	"math"
	"testing"

	"github.com/faucetgo/faucet/fixedpoint"
)

// FuzzPack: the packed word's round trip, ordering and edges, for any layout
// in the domain: every (tick, tokens) within the resolution window packs and
// resolves back exactly, a tick outside it resolves later (never earlier), no
// live word equals the tomb, and refill is monotone, telescoping and capped.
func FuzzPack(f *testing.F) {
	f.Add(uint64(1000), 1.0, int64(0), int64(0), uint64(0), uint64(0))
	f.Add(uint64(1e12), 1e9, int64(1<<40), int64(-5), uint64(1e12), uint64(1))
	f.Add(uint64(1001), 1.0/86400, int64(-1<<61), int64(1<<20), uint64(1000), uint64(1<<62))
	f.Add(uint64(268435454), 3.0, int64(123456789), int64(-(1 << 35)), uint64(7), uint64(99))
	f.Fuzz(func(t *testing.T, capacity uint64, rate float64, ref, back int64, tokens, elapsed uint64) {
		capacity = 1000 + capacity%(1e12-999) // 1 to 1e9 tokens
		if !(rate >= 1.0/86400 && rate <= 1e9) || float64(capacity)/1000/rate > 366*86400 {
			return
		}
		l, err := fixedpoint.NewLayout(capacity, rate)
		if err != nil {
			t.Fatalf("NewLayout(%d, %v): %v", capacity, rate, err)
		}
		ref = min(max(ref, -(1<<61)), 1<<61) >> l.TickShift
		span := int64(1) << l.TickBits
		tokens %= capacity + 1
		// A tick inside the window (ref+Lead-span, ref+Lead].
		in := ref + l.Lead - int64(uint64(back)%uint64(span))
		w := l.Pack(in, tokens)
		if w == fixedpoint.Tomb {
			t.Fatalf("live word %#x is the tomb", w)
		}
		if got := l.Resolve(w, ref); got != in {
			t.Fatalf("Resolve(Pack(%d)) = %d (ref %d, T=%d)", in, got, ref, l.TickBits)
		}
		if got := l.Tokens(w); got != tokens {
			t.Fatalf("Tokens = %d, want %d", got, tokens)
		}
		if tokens < capacity && l.Pack(in, tokens) >= l.Pack(in, tokens+1) {
			t.Fatal("more tokens at the same tick packed to a smaller word")
		}
		// Outside the window: resolved later than the truth.
		if out := in - span*(1+int64(uint64(back)%3)); out > math.MinInt64/2 {
			if got := l.Resolve(l.Pack(out, tokens), ref); got <= out {
				t.Fatalf("out-of-window tick %d resolved to %d, not later", out, got)
			}
		}
		// Refill: telescoping, monotone, and full after FillTicks.
		elapsed %= l.FillTicks + 1
		split := elapsed / 3
		a := l.Credit(in, split)
		b := l.Credit(in+int64(split), elapsed-split)
		if a+b != l.Credit(in, elapsed) {
			t.Fatalf("Credit does not telescope: %d + %d != %d", a, b, l.Credit(in, elapsed))
		}
		if elapsed > 0 && l.Credit(in, elapsed-1) > l.Credit(in, elapsed) {
			t.Fatal("Credit decreased with more time")
		}
		if l.Credit(in, l.FillTicks) < capacity {
			t.Fatalf("FillTicks %d refill only %d of %d quanta", l.FillTicks, l.Credit(in, l.FillTicks), capacity)
		}
		_, _, got := l.Advance(w, ref, fixedpoint.Instant{Tick: in + int64(l.FillTicks), Ceil: in + int64(l.FillTicks)})
		if got != capacity {
			t.Fatalf("Advance by FillTicks gives %d, want full %d", got, capacity)
		}
		// TicksUntil is the first tick that has the tokens.
		if tokens < capacity {
			k := l.TicksUntil(in, tokens, capacity)
			if tokens+l.Credit(in, k) < capacity || (k > 0 && tokens+l.Credit(in, k-1) >= capacity) {
				t.Fatalf("TicksUntil = %d is not the first full tick", k)
			}
		}
	})
}
