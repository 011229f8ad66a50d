package httplimit

import (
	"fmt"
	"math"
	"strconv"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// costSource is a compiled cost_source.
type costSource struct {
	kind  keyKind // kindHeader or kindQuery; fixed otherwise
	name  string
	fixed bool
	value float64 // the fixed cost
	def   float64 // default_cost
	// min and max bound a client's value (max 0: no bound), compared in
	// quanta as the engine charges them; reject refuses a value outside
	// instead of clamping it.
	min, max   float64
	minQ, maxQ uint64
	reject     bool
}

func newCostSource(r *Rule) costSource {
	c := costSource{fixed: r.CostSource == "fixed", value: r.FixedCost, def: r.DefaultCost,
		min: r.MinCost, max: r.MaxCost, reject: r.CostOutOfRange == costReject}
	if !c.fixed {
		spec, _ := parseKey(r.CostSource, false)
		c.kind, c.name = spec.kind, spec.name
		c.minQ, _ = fixedpoint.Quantize(c.min)
		c.maxQ, _ = fixedpoint.Quantize(c.max)
	}
	return c
}

// cost returns the request's cost under the rule. A header or parameter that
// is absent charges default_cost. One that is not a plain non-negative
// decimal ("2", "0.5") is refused: "+50", "5e1", "0x32" and " 5" are 50 or 5
// to some parsers, and an application behind the limiter may charge what it
// reads. Several values are refused by the reader (q.bad). A decimal too
// large for a float64 is MaxFloat64, above any burst. A value outside
// [min_cost, max_cost] is clamped to the nearer bound, or refused. refused
// is the problem, naming the source.
func (c *costSource) cost(q *request) (cost float64, refused string) {
	if c.fixed {
		return c.value, ""
	}
	var v string
	var ok bool
	if c.kind == kindHeader {
		v, ok = q.header(c.name)
	} else {
		v, ok = q.param(c.name)
	}
	if !ok || q.bad != "" {
		return c.def, ""
	}
	x, ok := parseCost(v)
	if !ok {
		if len(v) > 32 {
			v = v[:32] + "..."
		}
		return 0, "the cost in " + c.what() + " " + quote(c.name) + " must be a plain non-negative decimal such as 2 or 0.5, got " + strconv.Quote(v)
	}
	return c.bound(x, true)
}

// bound applies min_cost and max_cost to x, a cost chosen outside the rule:
// by the client, in the header or query parameter of the rule's cost_source
// (fromRequest), or by the caller of the check API. With cost_source "fixed"
// there are no bounds.
func (c *costSource) bound(x float64, fromRequest bool) (cost float64, refused string) {
	// Compared as charged: a value is rounded up to a quantum (0.0004
	// costs 0.001).
	xq, _ := fixedpoint.Quantize(x)
	var bound, side string
	switch {
	case xq < c.minQ:
		if !c.reject {
			return c.min, ""
		}
		bound, side = num(c.min), "below min_cost"
	case c.maxQ != 0 && xq > c.maxQ:
		if !c.reject {
			return c.max, ""
		}
		bound, side = num(c.max), "above max_cost"
	default:
		return x, ""
	}
	source := `the check API's "cost"`
	if fromRequest {
		source = c.what() + " " + quote(c.name)
	}
	return 0, fmt.Sprintf("the cost in %s is %s %s", source, side, bound)
}

func (c *costSource) what() string {
	if c.kind == kindHeader {
		return "header"
	}
	return "query parameter"
}

// parseCost accepts digits with an optional fraction: no sign, exponent,
// spaces, hex, NaN or infinity.
func parseCost(s string) (float64, bool) {
	digits, dot := 0, -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && dot < 0 && digits > 0:
			dot = i
		default:
			return 0, false
		}
	}
	if digits == 0 || dot == len(s)-1 {
		return 0, false
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Only a range error is possible for this syntax.
		return math.MaxFloat64, true
	}
	return x, true
}
