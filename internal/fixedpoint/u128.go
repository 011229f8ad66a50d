package fixedpoint

import "math/bits"

// u128 is an unsigned 128-bit integer, for the products of ticks and rates.
type u128 struct{ hi, lo uint64 }

func mul64(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	return u128{x.hi + y.hi + c, lo}
}

func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	return u128{x.hi - y.hi - b, lo}
}

func (x u128) isZero() bool { return x.hi|x.lo == 0 }

// shr returns x >> n for n < 128.
func (x u128) shr(n uint) u128 {
	switch {
	case n == 0:
		return x
	case n < 64:
		return u128{x.hi >> n, x.lo>>n | x.hi<<(64-n)}
	default:
		return u128{0, x.hi >> (n - 64)}
	}
}

// shrFits returns x >> n for n < 128 and whether it fits 64 bits; shifts
// below 64 take no switch, for Credit's fast path.
func (x u128) shrFits(n uint) (uint64, bool) {
	if n < 64 {
		// Go defines x.hi << 64 as 0, so n == 0 needs no case of its own.
		return x.lo>>n | x.hi<<(64-n), x.hi>>n == 0
	}
	return x.hi >> (n - 64), true
}

// shl returns x << n for n < 128.
func (x u128) shl(n uint) u128 {
	switch {
	case n == 0:
		return x
	case n < 64:
		return u128{x.hi<<n | x.lo>>(64-n), x.lo << n}
	default:
		return u128{x.lo << (n - 64), 0}
	}
}

// low returns the low n bits of x, n < 128.
func (x u128) low(n uint) u128 {
	switch {
	case n == 0:
		return u128{}
	case n < 64:
		return u128{0, x.lo & (1<<n - 1)}
	default:
		return u128{x.hi & (1<<(n-64) - 1), x.lo}
	}
}

// mod5p6 returns x mod 5^6; the divisions by a constant compile to
// multiplications. Products of a tick and a rate mostly fit 64 bits, where
// one reduction does.
func (x u128) mod5p6() uint64 {
	if x.hi == 0 {
		return x.lo % five6
	}
	const twoTo64Mod = (1 << 63 % five6) * 2 % five6
	return (x.hi%five6*twoTo64Mod + x.lo%five6) % five6
}
