package engine_test

import (
	"math"
	"math/big"
)

// model is an exact token bucket in rational arithmetic, written from the
// package documentation alone: continuous refill at rate, capped at burst,
// starting full; a time before the last update counts as the last update; a
// denied take changes nothing; a cost of 0 is a peek. It shares no code with
// the engine.
type model struct {
	rate, burst *big.Rat
	tokens      *big.Rat
	last        int64 // ns; valid once seen
	seen        bool
}

func newModel(rate, burst float64) *model {
	b := new(big.Rat).SetFloat64(burst)
	return &model{rate: new(big.Rat).SetFloat64(rate), burst: b, tokens: new(big.Rat).Set(b)}
}

// at returns the exact tokens at ns (clamped to the last update).
func (m *model) at(ns int64) *big.Rat {
	if !m.seen || ns <= m.last {
		return new(big.Rat).Set(m.tokens)
	}
	x := new(big.Rat).SetFrac(big.NewInt(ns-m.last), big.NewInt(1e9))
	x.Mul(x, m.rate)
	x.Add(x, m.tokens)
	if x.Cmp(m.burst) > 0 {
		x.Set(m.burst)
	}
	return x
}

// take applies an admitted take of cost at ns.
func (m *model) take(ns int64, cost *big.Rat) {
	m.tokens = m.at(ns).Sub(m.at(ns), cost)
	if !m.seen || ns > m.last {
		m.last, m.seen = ns, true
	}
}

// costOf is the documented charge for a float64 cost: the multiple of 0.001
// it is the nearest float to, or else its exact value rounded up to the next
// multiple of 0.001.
func costOf(n float64) *big.Rat {
	k := math.Round(n * 1000)
	if k/1000 == n {
		return big.NewRat(int64(k), 1000)
	}
	x := new(big.Rat).Mul(new(big.Rat).SetFloat64(n), big.NewRat(1000, 1))
	q := new(big.Int).Div(x.Num(), x.Denom())
	if new(big.Rat).SetInt(q).Cmp(x) < 0 {
		q.Add(q, big.NewInt(1))
	}
	return new(big.Rat).SetFrac(q, big.NewInt(1000))
}

// exactTokens turns a token count reported by the engine (a multiple of 0.001
// as float64) back into its exact value.
func exactTokens(x float64) *big.Rat { return big.NewRat(int64(math.Round(x*1000)), 1000) }

func ratF(x *big.Rat) float64 { f, _ := x.Float64(); return f }

// trailBound is the documented bound on how far the engine trails an exact
// bucket of rate (tokens/s) with ticks of tick ns (package fixedpoint).
func trailBound(rate *big.Rat, tick int64) *big.Rat {
	q := big.NewRat(1, 1000)
	tickRefill := new(big.Rat).Mul(rate, big.NewRat(tick, 1e9))
	b := new(big.Rat).Add(q, new(big.Rat).Mul(rate, big.NewRat(2*(tick-1), 1e9)))
	if tickRefill.Cmp(q) > 0 {
		b.Add(b, tickRefill)
	} else {
		b.Add(b, q)
	}
	if tick > 1 {
		b.Add(b, q).Add(b, tickRefill)
	}
	return b
}
