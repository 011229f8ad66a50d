package sim

import (
	"math"
	"strconv"
	"strings"
)

// niceTicks are labelled ticks from lo to hi at a round step, 1, 2, 2.5 or
// 5 times a power of ten, that gives about five of them; the labels carry
// no useless zeros (50, not 50.00).
func niceTicks(lo, hi float64) []tick {
	if !(hi > lo) {
		return []tick{{lo, formatTick(lo, 0)}}
	}
	raw := (hi - lo) / 5
	exp := math.Floor(math.Log10(raw))
	mag := math.Pow(10, exp)
	var step float64
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	// One decimal more than the power of ten shows a step of 2.5.
	decimals := max(0, int(-exp)+1)
	first := math.Ceil(lo/step) * step
	var out []tick
	for i := 0; ; i++ {
		// Computed per tick, not by adding steps, so rounding never
		// accumulates.
		v := first + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		out = append(out, tick{v, formatTick(v, decimals)})
	}
	return out
}

// formatTick is v with decimals digits after the point, less the trailing
// zeros.
func formatTick(v float64, decimals int) string {
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}
