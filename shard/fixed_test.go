package shard

import "github.com/faucetgo/faucet/fixedpoint"

// Fixed is the Generations of the tests' tables, whose one layout never
// changes: every bucket is of generation 0, and a new one is full.
type Fixed struct{ Layout *fixedpoint.Layout }

// Current returns 0.
func (f Fixed) Current() uint16 { return 0 }

// Fresh returns generation 0 and a full bucket from born or watermark.
func (f Fixed) Fresh(born, watermark int64) (uint16, fixedpoint.Epoch, fixedpoint.Word) {
	l := f.Layout
	e, w := l.PackNew(l.FullTick(l.At(born).Ceil, l.CeilTick(watermark)), l.Capacity)
	return 0, e, w
}
