package fixedpoint

import (
	"math"
	"math/bits"
)

// The refill is read off one grid, G(t) = floor(t * rateNum / den) quanta at
// tick t, counted from the epoch. A bucket updated at tick a holds at tick b
// its count plus G(b) - G(a), capped at Capacity. Because the grid is fixed
// and every update stores its tick, the credits of consecutive updates
// telescope: splitting an interval never drops a fractional quantum, however
// often a bucket is touched. Computing G(b) - G(a) needs only a's position
// between two quanta of the grid, its phase.

// smallShift is the largest rateShift whose denominator 5^6*2^rateShift is
// below 2^64, so that phases fit a uint64 (5^6 < 2^14). Every rate whose
// float64 ends at most 56 binary places after the point qualifies, integer
// rates among them; Credit takes a shorter path for those.
const smallShift = 50

// phase returns (tick * rateNum) mod den, the grid's progress past its last
// whole quantum at tick, in units of 1/den quanta.
func (l *Layout) phase(tick int64) u128 {
	if l.rateShift <= smallShift {
		return u128{0, l.phase64(tick)}
	}
	a := uint64(tick)
	if tick < 0 {
		a = uint64(-tick)
	}
	x := mul64(a, l.rateNum)
	// x mod (5^6 * 2^k) = ((x >> k) mod 5^6) * 2^k + (x mod 2^k)
	p := u128{0, x.shr(l.rateShift).mod5p6()}.shl(l.rateShift).add(x.low(l.rateShift))
	if tick < 0 && !p.isZero() {
		p = l.den.sub(p)
	}
	return p
}

// phase64 is phase for rateShift <= smallShift. Go defines shifts by 64 as
// 0, so the expressions hold for rateShift 0 without a branch.
func (l *Layout) phase64(tick int64) uint64 {
	a := uint64(tick)
	if tick < 0 {
		a = uint64(-tick)
	}
	k := l.rateShift
	hi, lo := bits.Mul64(a, l.rateNum)
	shifted := u128{hi >> k, lo>>k | hi<<(64-k)}
	p := shifted.mod5p6()<<k | lo&(1<<k-1)
	if tick < 0 && p != 0 {
		p = l.den.lo - p
	}
	return p
}

// Credit returns G(from+elapsed) - G(from): the quanta that refill between
// tick from and tick from+elapsed, for elapsed <= FillTicks.
//
// For a non-negative from whose grid values fit 64 bits once shifted by
// rateShift (any tick of the first 2^64/rateNum*2^rateShift: decades at the
// highest rates) it computes both grid values and subtracts them, since
// floor(floor(x/2^k)/5^6) = floor(x/(5^6*2^k)). The two are independent, so
// the CPU runs them side by side; the general path below feeds the phase's
// reduction into the credit's division instead.
func (l *Layout) Credit(from int64, elapsed uint64) uint64 {
	if from >= 0 {
		// from+elapsed fits: from <= 2^62 and elapsed <= FillTicks < 2^61.
		k := l.rateShift
		if to, ok := mul64(uint64(from)+elapsed, l.rateNum).shrFits(k); ok {
			// G(from)'s shifted product is no larger, so it fits too.
			at, _ := mul64(uint64(from), l.rateNum).shrFits(k)
			return to/five6 - at/five6
		}
	}
	if k := l.rateShift; k <= smallShift {
		hi, lo := bits.Mul64(elapsed, l.rateNum)
		var c uint64
		lo, c = bits.Add64(lo, l.phase64(from), 0)
		hi += c
		// The quotient fits 64 bits (below 5^6 * 2^41), so hi >> k is 0.
		return (lo>>k | hi<<(64-k)) / five6
	}
	z := l.phase(from).add(mul64(elapsed, l.rateNum))
	// z < den * (Capacity+2), so z >> rateShift < 5^6 * 2^41 fits 64 bits.
	return z.shr(l.rateShift).lo / five6
}

// ticksFor returns ceil((missing*den - p) / rateNum): the fewest ticks after a
// tick of phase p that refill missing quanta.
func (l *Layout) ticksFor(missing uint64, p u128) uint64 {
	n := mul64(missing, five6).shl(l.rateShift).sub(p)
	if n.hi >= l.rateNum {
		return math.MaxUint64 // more than 2^64 ticks: never within the clamped range
	}
	q, r := bits.Div64(n.hi, n.lo, l.rateNum)
	if r != 0 {
		q++
	}
	return q
}

// TicksUntil returns the fewest ticks after tick at that refill a bucket
// holding have quanta to at least need quanta (need <= Capacity).
func (l *Layout) TicksUntil(at int64, have, need uint64) uint64 {
	if have >= need {
		return 0
	}
	return l.ticksFor(need-have, l.phase(at))
}

// Boundary returns the first tick at or after tick at whose grid count
// reaches at's exact refill, ceil(at*rate) quanta: at itself if the grid is on
// a whole quantum there (phase 0), else the tick at which the grid next steps
// (whose phase is rarely 0, so Boundary of that tick is a quantum later).
//
// A full bucket is stored at this tick rather than at the tick it was found
// full. The grid's fraction of a quantum that had accrued at that tick belongs
// to tokens the cap discarded; stored at the earlier tick, that fraction would
// be credited again by the next refill, admitting up to one quantum more than
// an exact bucket. Stored at the boundary, the bucket counts as full a little
// later (less than one quantum's refill), and an exact bucket is never
// exceeded. A time before the boundary counts as the boundary, as any time
// before a bucket's stored tick does.
func (l *Layout) Boundary(at int64) int64 {
	p := l.phase(at)
	if p.isZero() {
		return at
	}
	return at + int64(l.ticksFor(1, p))
}

// FullTick returns the tick at which a bucket found full at tick ceil (a time
// rounded up) is stored, given known, a tick at which it was already stored
// (or evicted) full: known if ceil is before it, else the Boundary at or
// after ceil.
//
// known came from Boundary, which returns the tick where the grid first
// reaches a quantum, rarely one exactly on it. A time before known is
// credited no more than known's grid count, so known stands; applied to known
// again, Boundary would move the bucket another quantum's refill later, and
// repeated calls before known would each trail an exact bucket by one quantum
// more. At known itself the grid may be past its last whole quantum, so a
// time from known on takes its own Boundary.
func (l *Layout) FullTick(ceil, known int64) int64 {
	if ceil < known {
		return known
	}
	return l.Boundary(ceil)
}

// Advance returns the state of w, a word of a bucket whose epoch starts at
// base, at now: last is the tick of w's update, at = max(last, now.Tick) is
// the tick the state is taken at, and
// tokens the refilled count, at most Capacity. A bucket found full is taken
// at FullTick(now.Ceil, last) instead, and one that fills within now's tick
// (now.Tick < now.Ceil) keeps its count but is taken at Boundary(now.Ceil). A now before last
// counts as last: an earlier time never adds tokens and never moves a bucket
// back, nor forward if it was stored full.
func (l *Layout) Advance(w Word, base int64, now Instant) (last, at int64, tokens uint64) {
	last = l.Resolve(w, base)
	tokens = l.Tokens(w)
	at = max(last, now.Tick)
	if at > last && tokens < l.capacity {
		// at and last both lie within ±2^62, so the difference fits.
		elapsed := min(uint64(at-last), l.fillTicks)
		tokens = min(tokens+l.Credit(last, elapsed), l.capacity)
	}
	if tokens == l.capacity {
		// A word is stored full only at a tick FullTick returned; if it
		// was not full, now.Ceil >= now.Tick = at > last.
		at = l.FullTick(now.Ceil, last)
	} else if now.Ceil > at && l.capacity-tokens <= l.Credit(at, uint64(now.Ceil-at)) {
		// The call lies inside tick at, and the bucket fills before that
		// tick ends: at the call's real time it may be full already, and a
		// refill counted from at would credit again what the cap discarded.
		// The count stands (decisions are taken on it) but is stamped where
		// the grid has the bucket full.
		at = l.Boundary(now.Ceil)
	}
	return last, at, tokens
}
