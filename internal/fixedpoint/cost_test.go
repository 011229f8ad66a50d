package fixedpoint

import (
	"math"
	"math/big"
	"testing"
)

func TestQuantize(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want uint64
		ok   bool
	}{
		{0, 0, true},
		{1, 1000, true},
		{0.001, 1, true},
		{0.1, 100, true},
		{0.3, 300, true},
		{2.5, 2500, true},
		{0.30000000000000004, 301, true}, // not the float of 0.3: rounded up
		{0.0015, 2, true},
		{1e-9, 1, true},
		{123456.789, 123456789, true},
		{1e9, 1e12, true},
		{1 << 41, Never, true},
		{math.MaxFloat64, Never, true},
		{-1, 0, false},
		{math.Copysign(0, -1), 0, true},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
		{math.Inf(-1), 0, false},
	} {
		got, ok := Quantize(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Quantize(%v) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestQuantizeNeverUndercharges checks, for costs that are not the float of a
// multiple of a quantum, that the charge is the exact ceiling.
func TestQuantizeNeverUndercharges(t *testing.T) {
	for _, x := range []float64{1.0 / 3, math.Pi, 1e-7, 0.0009999, 999.9999999, math.Nextafter(1, 2), math.Nextafter(1, 0)} {
		q, ok := Quantize(x)
		if !ok {
			t.Fatalf("Quantize(%v) not ok", x)
		}
		exact := new(big.Rat).Mul(new(big.Rat).SetFloat64(x), big.NewRat(QuantaPerToken, 1))
		if _, isMultiple := QuantizeExact(x); isMultiple {
			continue
		}
		ceil := new(big.Int).Div(exact.Num(), exact.Denom())
		if new(big.Rat).SetInt(ceil).Cmp(exact) < 0 {
			ceil.Add(ceil, big.NewInt(1))
		}
		if q != ceil.Uint64() {
			t.Errorf("Quantize(%v) = %d, want ceil = %v", x, q, ceil)
		}
	}
}
