package fixedpoint

import "math"

// Never is the quanta of a cost above any capacity: never satisfiable.
const Never = math.MaxUint64

// maxExactTokens bounds where float64 still resolves a quantum: beyond it a
// cost is larger than any capacity anyway.
const maxExactTokens = 1 << 40

// Quantize converts a cost in tokens to quanta. A value that is the float64
// nearest to a multiple of one quantum (0.1, 2.5, 0.001) means exactly that
// multiple; any other value is rounded up to the next quantum, so a cost is
// never charged below what it says. ok is false for NaN, negative and
// infinite values; costs beyond 2^40 tokens return Never.
func Quantize(tokens float64) (quanta uint64, ok bool) {
	if !(tokens >= 0) || math.IsInf(tokens, 1) {
		return 0, false
	}
	if tokens > maxExactTokens {
		return Never, true
	}
	if u := uint64(tokens); float64(u) == tokens {
		return u * QuantaPerToken, true // whole tokens, the common case
	}
	if k, exact := QuantizeExact(tokens); exact {
		return k, true
	}
	p := tokens * QuantaPerToken
	// FMA yields the product's rounding error exactly; it decides the ceiling
	// when the rounded product lands on an integer.
	c := math.Ceil(p)
	if c == p && math.FMA(tokens, QuantaPerToken, -p) > 0 {
		c++
	}
	return uint64(c), true
}

// QuantizeExact reports whether tokens is the float64 nearest to a multiple
// of one quantum, and which multiple.
func QuantizeExact(tokens float64) (quanta uint64, exact bool) {
	if !(tokens >= 0) || tokens > maxExactTokens {
		return 0, false
	}
	k := math.Round(tokens * QuantaPerToken)
	if k/QuantaPerToken != tokens {
		return 0, false
	}
	return uint64(k), true
}

// TokensOf converts quanta to tokens.
func TokensOf(quanta uint64) float64 { return float64(quanta) / QuantaPerToken }
