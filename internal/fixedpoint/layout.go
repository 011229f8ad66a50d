package fixedpoint

import (
	"errors"
	"math"
	"math/bits"
)

// QuantaPerToken is the token resolution: a quantum is one thousandth of a
// token, so costs and bursts with three decimals are represented exactly.
const QuantaPerToken = 1000

// minHorizonShift is log2 of the shortest horizon, in nanoseconds, that a
// Layout accepts: 2^36 ns, about 68.7 s. The tick is the smallest power of
// two nanoseconds that gives at least this horizon.
const minHorizonShift = 36

// maxTokenBits is the widest token field, so ticks always keep at least
// 64-maxTokenBits = 24 bits.
const maxTokenBits = 40

// five6 is 5^6. A rate r = M*2^E tokens/s (the float64's exact value) refills
// r * 1000 quanta/token * 2^TickShift ns/tick / 1e9 ns/s = M*2^(E+TickShift-6)
// / 5^6 quanta per tick: a rational whose denominator is 5^6 times a power of
// two. Layout keeps it in that form.
const five6 = 15625

// rateShiftBits bounds the power of two in the rate's denominator, so that a
// whole fill's numerator, below Capacity * 5^6 * 2^rateShift, and every
// intermediate product fits in 128 bits: rateShift is at most rateShiftBits
// minus the bit length of Capacity (73 at the largest capacities, from 2^39;
// 103 at a burst of 1, enough for one token a year). Only rates whose float64
// has more significant bits than that can carry are rounded: in the
// engine's domain, at most the lowest 3 of 53 bits.
const rateShiftBits = 113

// maxTimeNanos bounds the times a Layout converts: ±2^62 ns, about ±146 years
// from the epoch. Beyond it every bucket is long full, so clamping changes
// nothing, and sums of two times cannot overflow an int64.
const maxTimeNanos = 1 << 62

// Layout is the word format and refill arithmetic of one bucket
// configuration. It is computed once by NewLayout and never changes; all its
// methods are pure functions of their arguments.
type Layout struct {
	capacity uint64
	// tokenBits is the width of the token field: the fewest bits that hold
	// capacity+1, so that an all-ones field (Tomb) is never a token count.
	tokenBits uint
	tickBits  uint
	tickShift uint
	// The refill is rateNum / (5^6 * 2^rateShift) quanta per tick: the
	// configured rate exactly, or rounded down (see rateShiftBits).
	rateNum   uint64
	rateShift uint
	fillTicks uint64
	// epochShift is log2 of an epoch's length in ticks: half the span of the
	// tick field (TickBits-1), so that a word stamped in the first half of
	// its epoch (EpochOf) has at least that much room to move forward.
	epochShift uint

	tokenMask uint64
	tickMask  uint64
	// den is 5^6 * 2^rateShift.
	den u128
}

// Capacity returns the burst in quanta.
func (l *Layout) Capacity() uint64 { return l.capacity }

// TickBits returns the width of the tick field, 64 minus the token field's.
func (l *Layout) TickBits() uint { return l.tickBits }

// TickShift returns log2 of a tick's length: a tick lasts 2^TickShift
// nanoseconds.
func (l *Layout) TickShift() uint { return l.tickShift }

// FillTicks returns a number of ticks that refills an empty bucket to full
// from any starting tick; longer gaps are cut to it before multiplying.
func (l *Layout) FillTicks() uint64 { return l.fillTicks }

// errRange is returned by NewLayout for a capacity or rate it cannot
// represent. The engine checks its documented domain first and never sees it.
var errRange = errors.New("fixedpoint: value out of range")

// NewLayout returns the layout for a bucket of capacity quanta refilled at
// tokensPerSecond (positive and finite).
func NewLayout(capacity uint64, tokensPerSecond float64) (*Layout, error) {
	if capacity == 0 || !(tokensPerSecond > 0) || math.IsInf(tokensPerSecond, 1) {
		return nil, errRange
	}
	w := uint(bits.Len64(capacity + 1))
	if w > maxTokenBits {
		return nil, errRange
	}
	l := &Layout{capacity: capacity, tokenBits: w, tickBits: 64 - w}
	if l.tickBits < minHorizonShift {
		l.tickShift = minHorizonShift - l.tickBits
	}
	if !l.setRate(tokensPerSecond) {
		return nil, errRange
	}
	l.tokenMask = 1<<w - 1
	l.tickMask = 1<<l.tickBits - 1
	l.epochShift = l.tickBits - 1
	// FillTicks = ceil(Capacity * den / rateNum); it must leave the clamped
	// time range room, and a quantum's refill must take well under an
	// epoch, because a full bucket is stored at its next quantum boundary,
	// up to a quantum's refill after the write that found it full.
	fill := l.ticksFor(capacity, u128{})
	perQuantum := l.ticksFor(1, u128{})
	if fill == 0 || fill > 1<<(61-l.tickShift) || perQuantum > 1<<(l.epochShift-3) {
		return nil, errRange
	}
	l.fillTicks = fill
	return l, nil
}

// Rate returns the refill rate the layout computes with: num / (5^6 *
// 2^shift) quanta per tick. It is the configured rate exactly, or slightly
// below it when the rate needed more bits than the layout keeps. Stores that
// keep buckets elsewhere use it to refill exactly as the engine does.
func (l *Layout) Rate() (num uint64, shift uint) { return l.rateNum, l.rateShift }

// setRate stores r as rateNum / (5^6 * 2^rateShift) quanta per tick.
func (l *Layout) setRate(r float64) bool {
	frac, exp := math.Frexp(r) // r = frac * 2^exp, frac in [0.5, 1)
	m := uint64(frac * (1 << 53))
	e := exp - 53
	tz := bits.TrailingZeros64(m)
	m >>= tz
	e += tz
	// quanta per tick = m * 2^(e + TickShift - 6) / 5^6
	e += int(l.tickShift) - 6
	maxShift := rateShiftBits - bits.Len64(l.capacity)
	switch {
	case e >= 0:
		if bits.Len64(m)+e > 62 {
			return false
		}
		l.rateNum, l.rateShift = m<<e, 0
	case -e <= maxShift:
		l.rateNum, l.rateShift = m, uint(-e)
	default:
		// Drop the low bits of m: the rate rounds down (toward denying).
		drop := uint(-e - maxShift)
		if drop >= 64 {
			return false
		}
		l.rateNum, l.rateShift = m>>drop, uint(maxShift)
	}
	l.den = u128{0, five6}.shl(l.rateShift)
	return l.rateNum != 0
}

// Instant is a time in ticks: Tick rounds it down and Ceil up (they are
// equal when the time falls on a tick). Refill is credited up to Tick; a full
// bucket is stamped no earlier than Ceil, since its tokens already include
// the refill up to the exact time.
type Instant struct{ Tick, Ceil int64 }

// At converts nanoseconds since the epoch to an Instant. Values beyond
// ±2^62 ns are clamped first.
func (l *Layout) At(ns int64) Instant {
	ns = ClampNanos(ns)
	t := ns >> l.tickShift
	if ns&(l.TickNanos()-1) != 0 {
		return Instant{t, t + 1}
	}
	return Instant{t, t}
}

// CeilTick returns the first tick that starts at or after ns, like
// At(ns).Ceil but without clamping ns beyond ±2^62: for a bucket's stamp
// converted to another unit, which may lie past the bound (a full bucket is
// stored from its next quantum, FullTick), and must keep that distance.
func (l *Layout) CeilTick(ns int64) int64 {
	if ns < -(1 << 62) {
		return l.At(ns).Ceil
	}
	return (ns + l.TickNanos() - 1) >> l.tickShift
}

// Nanos returns the first nanosecond of tick.
func (l *Layout) Nanos(tick int64) int64 { return tick << l.tickShift }

// TickNanos is the length of a tick in nanoseconds.
func (l *Layout) TickNanos() int64 { return 1 << l.tickShift }

// HorizonNanos is 2^(TickBits+TickShift): the span of distinct tick fields.
func (l *Layout) HorizonNanos() int64 {
	if l.tickBits+l.tickShift >= 63 {
		return math.MaxInt64
	}
	return 1 << (l.tickBits + l.tickShift)
}

// ClampNanos bounds a time in nanoseconds since an epoch to ±2^62, the span
// every layout and wait is computed in.
func ClampNanos(ns int64) int64 {
	return min(max(ns, -maxTimeNanos), maxTimeNanos)
}
