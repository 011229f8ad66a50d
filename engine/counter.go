package engine

// This file holds all of the package's unsafe code.

import (
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// counter is a striped event counter for the hot path. One shared atomic
// serialises every core on one cache line; xsync.Counter avoids that but
// costs a sync.Pool round trip per Add (about 19 ns here against 7 for a
// plain atomic add). This counter picks its stripe from the calling
// goroutine's stack address, which differs between goroutines and is free to
// read, so goroutines on different cores mostly add to different lines.
type counter struct {
	stripes []paddedCount
	shift   uint
}

type paddedCount struct {
	n atomic.Uint64
	//lint:ignore U1000 prevents false sharing between stripes
	_ [unsafe.Sizeof(cpu.CacheLinePad{}) - 8]byte
}

func newCounter() counter {
	n := 1 << bits.Len(uint(4*runtime.GOMAXPROCS(0)-1))
	return counter{stripes: make([]paddedCount, n), shift: 64 - uint(bits.TrailingZeros(uint(n)))}
}

// add adds one. Goroutine stacks are at least 8 KiB apart, so the address of a
// local variable, shifted past that and hashed, spreads goroutines over the
// stripes; a stack that moves only changes the stripe, never the count.
func (c *counter) add() {
	var probe byte
	h := uint64(uintptr(unsafe.Pointer(&probe))>>13) * 0x9E3779B97F4A7C15
	c.stripes[h>>c.shift].n.Add(1)
}

// load returns the sum over the stripes; adds racing with it may be missing.
func (c *counter) load() uint64 {
	var s uint64
	for i := range c.stripes {
		s += c.stripes[i].n.Load()
	}
	return s
}
