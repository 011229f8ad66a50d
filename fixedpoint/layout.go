package fixedpoint

import (
	"errors"
	"math"
	"math/bits"
)

// QuantaPerToken is the token resolution: a quantum is one thousandth of a
// token, so costs and bursts with three decimals are represented exactly.
const QuantaPerToken = 1000

// MinHorizonShift is log2 of the shortest horizon, in nanoseconds, that a
// Layout accepts: 2^36 ns, about 68.7 s. The tick is the smallest power of
// two nanoseconds that gives at least this horizon.
const MinHorizonShift = 36

// MaxTokenBits is the widest token field, so ticks always keep at least
// 64-MaxTokenBits = 24 bits.
const MaxTokenBits = 40

// five6 is 5^6. A rate r = M*2^E tokens/s (the float64's exact value) refills
// r * 1000 quanta/token * 2^TickShift ns/tick / 1e9 ns/s = M*2^(E+TickShift-6)
// / 5^6 quanta per tick: a rational whose denominator is 5^6 times a power of
// two. Layout keeps it in that form.
const five6 = 15625

// rateShiftBits bounds the power of two in the rate's denominator, so that a
// whole fill's numerator, below Capacity * 5^6 * 2^RateShift, and every
// intermediate product fits in 128 bits: RateShift is at most rateShiftBits
// minus the bit length of Capacity (72 at the largest capacity, 2^40; 103
// at a burst of 1, enough for one token a year). Only rates whose float64
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
	// Capacity is the burst in quanta.
	Capacity uint64
	// TokenBits is the width of the token field: the fewest bits that hold
	// Capacity+1, so that an all-ones field (Tomb) is never a token count.
	TokenBits uint
	// TickBits is the width of the tick field, 64-TokenBits.
	TickBits uint
	// TickShift: a tick lasts 2^TickShift nanoseconds.
	TickShift uint
	// The refill is RateNum / (5^6 * 2^RateShift) quanta per tick.
	RateNum   uint64
	RateShift uint
	// Exact reports that this fraction is the configured rate exactly. It is
	// false only for rates whose float64 has more significant bits than a
	// denominator of 2^(113-bits(Capacity)) can carry; those are rounded down, by less
	// than one part in 2^50 for every rate in the engine's domain.
	Exact bool
	// FillTicks is a number of ticks that refills an empty bucket to full
	// from any starting tick; longer gaps are cut to it before multiplying.
	FillTicks uint64
	// EpochShift is log2 of an epoch's length in ticks: half the span of the
	// tick field (TickBits-1), so that a word stamped in the first half of
	// its epoch (EpochOf) has at least that much room to move forward.
	EpochShift uint

	tokenMask uint64
	tickMask  uint64
	// den is 5^6 * 2^RateShift.
	den u128
}

// ErrRange is returned by NewLayout for a capacity or rate it cannot
// represent. The engine checks its documented domain first and never sees it.
var ErrRange = errors.New("fixedpoint: value out of range")

// NewLayout returns the layout for a bucket of capacity quanta refilled at
// tokensPerSecond (positive and finite).
func NewLayout(capacity uint64, tokensPerSecond float64) (*Layout, error) {
	if capacity == 0 || !(tokensPerSecond > 0) || math.IsInf(tokensPerSecond, 1) {
		return nil, ErrRange
	}
	w := uint(bits.Len64(capacity + 1))
	if w > MaxTokenBits {
		return nil, ErrRange
	}
	l := &Layout{Capacity: capacity, TokenBits: w, TickBits: 64 - w}
	if l.TickBits < MinHorizonShift {
		l.TickShift = MinHorizonShift - l.TickBits
	}
	if !l.setRate(tokensPerSecond) {
		return nil, ErrRange
	}
	l.tokenMask = 1<<w - 1
	l.tickMask = 1<<l.TickBits - 1
	l.EpochShift = l.TickBits - 1
	// FillTicks = ceil(Capacity * den / RateNum); it must leave the clamped
	// time range room, and a quantum's refill must take well under an
	// epoch, because a full bucket is stored at its next quantum boundary,
	// up to a quantum's refill after the write that found it full.
	fill := l.ticksFor(capacity, u128{})
	perQuantum := l.ticksFor(1, u128{})
	if fill == 0 || fill > 1<<(61-l.TickShift) || perQuantum > 1<<(l.EpochShift-3) {
		return nil, ErrRange
	}
	l.FillTicks = fill
	return l, nil
}

// setRate stores r as RateNum / (5^6 * 2^RateShift) quanta per tick.
func (l *Layout) setRate(r float64) bool {
	frac, exp := math.Frexp(r) // r = frac * 2^exp, frac in [0.5, 1)
	m := uint64(frac * (1 << 53))
	e := exp - 53
	tz := bits.TrailingZeros64(m)
	m >>= tz
	e += tz
	// quanta per tick = m * 2^(e + TickShift - 6) / 5^6
	e += int(l.TickShift) - 6
	maxShift := rateShiftBits - bits.Len64(l.Capacity)
	l.Exact = true
	switch {
	case e >= 0:
		if bits.Len64(m)+e > 62 {
			return false
		}
		l.RateNum, l.RateShift = m<<e, 0
	case -e <= maxShift:
		l.RateNum, l.RateShift = m, uint(-e)
	default:
		// Drop the low bits of m: the rate rounds down (toward denying).
		drop := uint(-e - maxShift)
		if drop >= 64 {
			return false
		}
		l.RateNum, l.RateShift = m>>drop, uint(maxShift)
		l.Exact = m&(1<<drop-1) == 0
	}
	l.den = u128{0, five6}.shl(l.RateShift)
	return l.RateNum != 0
}

// Instant is a time in ticks: Tick rounds it down and Ceil up (they are
// equal when the time falls on a tick). Refill is credited up to Tick; a full
// bucket is stamped no earlier than Ceil, since its tokens already include
// the refill up to the exact time.
type Instant struct{ Tick, Ceil int64 }

// At converts nanoseconds since the epoch to an Instant. Values beyond
// ±2^62 ns are clamped first.
func (l *Layout) At(ns int64) Instant {
	ns = clampNanos(ns)
	t := ns >> l.TickShift
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
	return (ns + l.TickNanos() - 1) >> l.TickShift
}

// Tick converts nanoseconds since the epoch to a tick, rounding down (toward
// fewer tokens). Values beyond ±2^62 ns are clamped first.
func (l *Layout) Tick(ns int64) int64 {
	return clampNanos(ns) >> l.TickShift
}

// Nanos returns the first nanosecond of tick.
func (l *Layout) Nanos(tick int64) int64 { return tick << l.TickShift }

// TickNanos is the length of a tick in nanoseconds.
func (l *Layout) TickNanos() int64 { return 1 << l.TickShift }

// HorizonNanos is 2^(TickBits+TickShift): the span of distinct tick fields.
func (l *Layout) HorizonNanos() int64 {
	if l.TickBits+l.TickShift >= 63 {
		return math.MaxInt64
	}
	return 1 << (l.TickBits + l.TickShift)
}

func clampNanos(ns int64) int64 {
	return min(max(ns, -maxTimeNanos), maxTimeNanos)
}
