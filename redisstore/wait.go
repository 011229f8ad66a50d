package redisstore

import (
	"math/bits"
	"time"
)

// wait returns the time from now until a bucket holding have quanta at tick
// at holds need: the first instant at which the refill grid has added
// (need-have)*q - phase(at) more, in units of 1/q quanta, at p units per
// microsecond, rounded up to the nanosecond. at is never before now (the
// scripts stamp a bucket at now or later), and the wait is at most a fill
// time, a year, so nothing overflows.
//
// It is the arithmetic of the engine's fixedpoint.Layout.TicksUntil with one
// microsecond as the tick, in 128-bit integers; the scripts return the
// state, not the wait, because the same exact arithmetic in Lua's float64
// numbers cost the server more than the rest of a take.
func (u units) wait(at int64, have, need uint64, now int64) time.Duration {
	if have >= need {
		return 0
	}
	// (need-have)*q/p is at most a fill time, so the quotient fits and
	// Div64's high word is below p.
	hi, lo := bits.Mul64(need-have, u.q)
	k, rem := bits.Div64(hi, lo, u.p)
	// The grid is phase(at) units into its current quantum already.
	// (need-have)*q >= q > phase, so k >= a.
	ph := u.phase(at)
	a, b := ph/u.p, ph%u.p
	k -= a
	if rem < b {
		k--
		rem += u.p
	}
	rem -= b
	// rem < p < 2^52: rem*1000 fits.
	ns := (rem*1000 + u.p - 1) / u.p
	return time.Duration(at-now+int64(k))*time.Microsecond + time.Duration(ns)
}

// phase is t*p mod q, the grid's progress past its last whole quantum at
// microsecond t (t >= 0: the scripts' ticks are Redis TIME).
func (u units) phase(t int64) uint64 {
	hi, lo := bits.Mul64(uint64(t)%u.q, u.p)
	_, r := bits.Div64(hi, lo, u.q)
	return r
}
