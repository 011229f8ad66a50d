package fuzz

import (
	"testing"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// FuzzPack: the packed word's round trip, ordering and edges, for any layout
// in the domain: every (tick, tokens) within its epoch's span packs and
// resolves back exactly, whatever the epoch (the whole clamped time range);
// a tick outside the span does not pack; no live word equals the tomb; and
// refill is monotone, telescoping and capped.
func FuzzPack(f *testing.F) {
	f.Add(uint64(1000), 1.0, int64(0), int64(0), uint64(0), uint64(0))
	f.Add(uint64(1e12), 1e9, int64(1<<40), int64(-5), uint64(1e12), uint64(1))
	f.Add(uint64(1001), 1.0/86400, int64(-1<<61), int64(1<<20), uint64(1000), uint64(1<<62))
	f.Add(uint64(268435454), 3.0, int64(123456789), int64(-(1 << 35)), uint64(7), uint64(99))
	f.Add(uint64(1e12), 1e9, int64(1<<62), int64(-1), uint64(5), uint64(0))
	f.Fuzz(func(t *testing.T, capacity uint64, rate float64, at, into int64, tokens, elapsed uint64) {
		capacity = 1000 + capacity%(1e12-999) // 1 to 1e9 tokens
		if !(rate >= 1.0/(366*86400) && rate <= 1e9) || float64(capacity)/1000/rate > 366*86400 {
			return
		}
		l, err := fixedpoint.NewLayout(capacity, rate)
		if err != nil {
			t.Fatalf("NewLayout(%d, %v): %v", capacity, rate, err)
		}
		stamp := min(max(at, -(1<<62)), 1<<62) >> l.TickShift() // a stamp in the clamped range
		ep := l.EpochOf(stamp)
		base := l.Base(ep)
		span := int64(1) << l.TickBits()
		if off := stamp - base; off < 0 || off >= span/2 {
			t.Fatalf("EpochOf(%d) = %d: the stamp is %d ticks into a span of %d, want the first half", stamp, ep, off, span)
		}
		tokens %= capacity + 1
		// Any tick of the epoch's span, for the bucket's whole life.
		in := base + int64(uint64(into)%uint64(span))
		w, ok := l.Pack(base, in, tokens)
		if !ok || w == fixedpoint.Tomb {
			t.Fatalf("Pack(%d) in the span of epoch %d: %#x, %v", in, ep, w, ok)
		}
		if got := l.Resolve(w, base); got != in {
			t.Fatalf("Resolve(Pack(%d)) = %d (base %d, T=%d)", in, got, base, l.TickBits())
		}
		if got := l.Tokens(w); got != tokens {
			t.Fatalf("Tokens = %d, want %d", got, tokens)
		}
		if tokens < capacity {
			if w2, _ := l.Pack(base, in, tokens+1); w >= w2 {
				t.Fatal("more tokens at the same tick packed to a smaller word")
			}
		}
		// Outside the span: not packed.
		for _, out := range []int64{base - 1 - int64(uint64(into)%3), base + span + int64(uint64(into)%uint64(span))} {
			if got, ok := l.Pack(base, out, tokens); ok || got != fixedpoint.Tomb {
				t.Fatalf("Pack(%d) outside the span [%d, %d) gave %#x, %v", out, base, base+span, got, ok)
			}
		}
		// Refill: telescoping, monotone, and full after FillTicks.
		elapsed %= l.FillTicks() + 1
		split := elapsed / 3
		a := l.Credit(in, split)
		b := l.Credit(in+int64(split), elapsed-split)
		if a+b != l.Credit(in, elapsed) {
			t.Fatalf("Credit does not telescope: %d + %d != %d", a, b, l.Credit(in, elapsed))
		}
		if elapsed > 0 && l.Credit(in, elapsed-1) > l.Credit(in, elapsed) {
			t.Fatal("Credit decreased with more time")
		}
		if l.Credit(in, l.FillTicks()) < capacity {
			t.Fatalf("FillTicks %d refill only %d of %d quanta", l.FillTicks(), l.Credit(in, l.FillTicks()), capacity)
		}
		// However long after the span: a fill time is full.
		later := in + int64(l.FillTicks()) + int64(uint64(into)%uint64(span))
		if _, _, got := l.Advance(w, base, fixedpoint.Instant{Tick: later, Ceil: later}); got != capacity {
			t.Fatalf("Advance to %d (a fill time or more) gives %d, want full %d", later, got, capacity)
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
