package shard

import (
	"sync/atomic"

	"github.com/faucetgo/faucet/fixedpoint"
	"golang.org/x/sys/cpu"
)

// Ref is an engine's reference tick: a lower bound, within RefStep, of the
// newest tick any bucket word holds. Words store only the low bits of their
// tick; fixedpoint.Layout.Resolve restores the rest against Ref.
//
// It sits on its own cache line because every take reads it, while it is
// written only once per RefStep of clock progress (Horizon/16).
type Ref struct {
	_ cpu.CacheLinePad
	// v only increases. A writer raises it (Cover) before publishing a word
	// whose tick is more than RefStep above it, so any goroutine that loads
	// such a word and then loads v sees the raised value.
	v atomic.Int64
	_ cpu.CacheLinePad
}

// Load returns the reference tick.
func (r *Ref) Load() int64 { return r.v.Load() }

// Cover raises the reference, last read as seen, so that tick lies within
// RefStep above it.
func (r *Ref) Cover(l *fixedpoint.Layout, seen, tick int64) {
	for tick > seen+l.RefStep {
		if r.v.CompareAndSwap(seen, tick) {
			return
		}
		seen = r.v.Load()
	}
}

// Set initialises the reference; it must not race with any other use.
func (r *Ref) Set(tick int64) { r.v.Store(tick) }
