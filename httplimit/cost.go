package httplimit

import (
	"math"
	"net/http"
	"strconv"
)

// costSource is a compiled cost_source.
type costSource struct {
	kind  keyKind // kindHeader or kindQuery; fixed otherwise
	name  string
	fixed bool
	value float64 // the fixed cost
	def   float64 // default_cost
}

// cost returns the request's cost under the rule. A header or parameter that
// is absent, repeated, or not a plain non-negative decimal ("2", "0.5") falls
// back to default_cost; a decimal too large for a float64 is MaxFloat64, above any
// burst.
func (c *costSource) cost(r *http.Request, q func() map[string][]string) float64 {
	if c.fixed {
		return c.value
	}
	var vals []string
	if c.kind == kindHeader {
		vals = r.Header.Values(c.name)
	} else {
		vals = q()[c.name]
	}
	if len(vals) != 1 {
		return c.def
	}
	if x, ok := parseCost(vals[0]); ok {
		return x
	}
	return c.def
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
