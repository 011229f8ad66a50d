package fuzz

import (
	"math"
	"math/big"
)

// spec is the reference token bucket, built from the documentation of
// package engine and nothing else. The rate is its float64's exact value,
// the burst the multiple of 0.001 nearest its float64. Tokens are exact
// rationals; time is nanoseconds since the engine's epoch (the first time it
// was given), clamped to ±2^62 as documented.
//
//   - A bucket starts full; tokens grow by rate per second, capped at burst.
//   - A time before the bucket's last update counts as that update.
//   - A take of c admits iff tokens >= c, and then subtracts c and records
//     the (clamped) time. A denial and a peek (c = 0) change nothing.
//   - A cost is the multiple of 0.001 its float64 is nearest to, or else its
//     exact value rounded up to the next multiple of 0.001; costs above the
//     burst, negative, NaN or infinite are never satisfiable.
type spec struct {
	rate, burst *big.Rat
	buckets     map[string]*specBucket
}

type specBucket struct {
	tokens *big.Rat
	last   int64
}

func newSpec(rate, burst float64) *spec {
	return &spec{
		rate:    new(big.Rat).SetFloat64(rate),
		burst:   milli(burst), // the multiple of 0.001 the float64 stands for
		buckets: map[string]*specBucket{},
	}
}

const timeBound = 1 << 62

func clampNS(ns int64) int64 { return min(max(ns, -timeBound), timeBound) }

// level returns the exact tokens of key at ns, and the clamped time it is
// taken at.
func (s *spec) level(key string, ns int64) (*big.Rat, int64) {
	ns = clampNS(ns)
	b, ok := s.buckets[key]
	if !ok {
		return new(big.Rat).Set(s.burst), ns
	}
	if ns <= b.last {
		return new(big.Rat).Set(b.tokens), b.last
	}
	// The difference of two clamped times can reach 2^63: in big integers.
	elapsed := new(big.Int).Sub(big.NewInt(ns), big.NewInt(b.last))
	grown := new(big.Rat).SetFrac(elapsed, big.NewInt(1e9))
	grown.Mul(grown, s.rate).Add(grown, b.tokens)
	if grown.Cmp(s.burst) > 0 {
		grown.Set(s.burst)
	}
	return grown, ns
}

// spend records an admitted take of cost at ns.
func (s *spec) spend(key string, ns int64, cost *big.Rat) {
	tokens, at := s.level(key, ns)
	s.buckets[key] = &specBucket{tokens: tokens.Sub(tokens, cost), last: at}
}

// charge returns what a float64 cost charges, and false if it can never be
// satisfied.
func (s *spec) charge(n float64) (*big.Rat, bool) {
	if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
		return nil, false
	}
	var c *big.Rat
	if k := math.Round(n * 1000); k/1000 == n {
		c = new(big.Rat).SetFrac(new(big.Int).SetUint64(uint64(k)), big.NewInt(1000))
	} else {
		milli := new(big.Rat).Mul(new(big.Rat).SetFloat64(n), big.NewRat(1000, 1))
		q, r := new(big.Int).QuoRem(milli.Num(), milli.Denom(), new(big.Int))
		if r.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
		c = new(big.Rat).SetFrac(q, big.NewInt(1000))
	}
	return c, c.Cmp(s.burst) <= 0
}

func f64(x *big.Rat) float64 { f, _ := x.Float64(); return f }

// milli returns a token count reported by the engine (a multiple of 0.001 as
// float64) as an exact rational.
func milli(x float64) *big.Rat { return big.NewRat(int64(math.Round(x*1000)), 1000) }
