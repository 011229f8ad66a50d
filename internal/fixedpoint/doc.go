// Package fixedpoint is the arithmetic of one token bucket packed into a
// single 64-bit word: packing, refill, take and the time until a count is
// reached. It has no state and no dependencies outside the standard library's
// math packages; the engine owns the atomics.
//
// Package fixedpoint is an implementation detail of engine; its API may change
// without notice.
//
// # The word
//
//	bit 63                       W                        0
//	+----------------------------+------------------------+
//	|  tick field (T = 64-W bits) | token field (W bits)  |
//	+----------------------------+------------------------+
//
// Tokens are counted in quanta of 1/1000 token (QuantaPerToken), so a burst or
// cost written with three decimals is exact. W is the fewest bits that hold
// Capacity+1 quanta: 10 bits for a burst of 1, 30 for 1e6, 40, the widest,
// for 1e9, the largest burst. A token field of all ones is never a count; the
// all-ones word, Tomb, marks an evicted bucket.
//
// The tick field keeps the bucket's last update, in ticks of 2^TickShift
// nanoseconds since the engine's epoch, relative to the base of the bucket's
// epoch (below). TickShift is the smallest value that makes the span of the
// field, the horizon 2^(T+TickShift) ns, at least 2^36 ns (68.7 s):
//
//	Burst      W   T   tick     horizon
//	1         10  54   1 ns     208 days
//	100       17  47   1 ns     39 hours
//	1e5       27  37   1 ns     2.3 min
//	1e6       30  34   4 ns     68.7 s
//	1e9       40  24   4096 ns  68.7 s
//
// Both units depend on the burst only, never on the rate: the rate lives in the
// Layout, so a later change of rate needs no rewrite of any word.
//
// # Epochs
//
// Time is cut into epochs of half a horizon (2^(T-1) ticks; EpochOf, Base).
// Every bucket has an epoch for its whole life, kept beside its word rather
// than in it, and its word holds the tick of its last update minus the epoch's
// base: any tick from the base to a horizon after it. A word is therefore
// exact on its own, whatever time it is read at and whatever other buckets
// have done: an idle bucket read after a jump of the clock of any length,
// or after a process was stopped for a month, holds exactly what it refilled.
// A new bucket takes the epoch whose first half holds its stamp, so it has at
// least half a horizon of later ticks; a write past its span cannot be packed
// (Pack, Step.NeedsEpoch), and the bucket is then replaced by one of the
// epoch of that write: one allocation per half a horizon of a bucket's own
// progress, at most.
//
// # Refill and rounding
//
// A rate of r tokens per second refills r*1000*2^TickShift/1e9 quanta per
// tick. For the float64 r = M*2^E that is M*2^(E+TickShift-6) / 5^6: a
// fraction whose denominator is 5^6 times a power of two, N / (5^6*2^k),
// which the Layout keeps exactly. Only a rate with more significant bits than
// a denominator of 2^73 can carry is rounded down, by less than one part in
// 2^50.
//
// Refill is read off one grid, G(t) = floor(t*N / (5^6*2^k)) quanta at tick
// t, counted from the epoch. A bucket updated at tick a holds at tick b its
// count plus G(b)-G(a), capped at Capacity. The grid is fixed, so the credits
// of consecutive updates telescope: no fractional quantum is ever dropped
// between updates, and for an exact rate the grid is exactly
// floor(t*rate): a bucket of rate 1/s drained at 0 s has one token again at
// exactly 1 s, 2 s, 3 s, however often it was polled in between.
//
// A bucket that reaches its capacity is stored at the grid's next whole
// quantum (Layout.Boundary), not at the tick it was found full: the fraction
// of a quantum accrued at that tick belongs to tokens the cap discarded, and
// must not be credited again.
//
// Every rounding takes the side of denying: times are floored to ticks, a
// full bucket's time is moved up to the next quantum, inexact rates and costs
// that are not a multiple of a quantum are rounded against the caller, and
// waiting times are rounded up to the tick that admits. The engine therefore
// never admits what an exact bucket (same rate, real-valued tokens) would
// deny, and for inputs in whole nanoseconds it trails that bucket by less than
// one quantum, plus the larger of one quantum and one tick's refill, plus
// 2*(tick-1 ns) of refill, however many requests are made: one quantum and
// tick-1 ns for flooring the current time; tick-1 ns for rounding the time a
// bucket was found full up to a tick, and up to a quantum more (or a whole
// tick more, when a tick refills more than a quantum) to reach the boundary.
// Ticks longer than 1 ns add one quantum and one tick's refill: a bucket that
// fills within the tick of a call (after its floored time, by the call's real
// time) keeps the count it had at the floor, stamped at the boundary.
//
// With 1 ns ticks (bursts up to 268,435 tokens) that is 0.002 token up to 1e6
// tokens/s and 0.001 token plus 1 ns of refill above (1 token at 1e9
// tokens/s, if the rate is not a whole number of quanta per nanosecond); it
// grows to 6 tokens at 1e9 tokens/s with 2 ns ticks, and to 16,382 tokens at
// a burst of 1e9 and 1e9 tokens/s (4096 ns ticks: a 40-bit token field
// leaves 24 bits of time, and the horizon must stay above a minute).
//
// Times beyond ±2^62 ns (±146 years) from the epoch are clamped; every bucket
// is long full by then, so no decision changes.
package fixedpoint
