package fixedpoint

import "testing"

var sinkWord Word

// BenchmarkTake times Layout.Take on a bucket that is neither empty nor full,
// called every 60 ns: with 1 ns ticks every call refills (refill=every, with
// a rate of few binary digits and with 33.3/s, whose grid denominator does
// not fit 64 bits); with 4096 ns ticks (a burst of 1e9) only one call in 68 does.
// refill=none repeats one tick.
func BenchmarkTake(b *testing.B) {
	for _, c := range []struct {
		name     string
		capacity uint64
		rate     float64
		step     int64
	}{
		{"tick=1ns/rate=100/refill=every", 1e6, 100, 60},
		{"tick=1ns/rate=33.3/refill=every", 1e6, 33.3, 60},
		{"tick=1ns/rate=100/refill=none", 1e6, 100, 0},
		{"tick=4096ns/rate=1e6/refill=rare", 1e12, 1e6, 60},
	} {
		b.Run(c.name, func(b *testing.B) {
			l, err := NewLayout(c.capacity, c.rate)
			if err != nil {
				b.Fatal(err)
			}
			w, _ := l.Pack(0, 0, l.capacity/2)
			var ns int64
			for b.Loop() {
				ns += c.step
				tick := ns >> l.tickShift
				if s := l.Take(w, 0, Instant{Tick: tick, Ceil: tick}, 1); s.Write() {
					w = s.Next
				} else {
					ns = 0 // past the epoch's span, or drained: start over
					w, _ = l.Pack(0, 0, l.capacity/2)
				}
			}
			sinkWord = w
		})
	}
}
