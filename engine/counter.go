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
// goroutine's stack address, which is free to read and stays the same for
// the goroutine, so each core keeps writing lines it already owns. (Mixing in
// the key's hash to spread goroutines call by call was measured and dropped:
// every core then writes every stripe, and each add misses in cache, which
// nearly doubled the cost of a call with two goroutines.) With 16 stripes per
// CPU, two goroutines share a stripe, and contend for their lives, with
// probability 1/(16*GOMAXPROCS) per pair.
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
	n := 1 << bits.Len(uint(16*runtime.GOMAXPROCS(0)-1))
	return counter{stripes: make([]paddedCount, n), shift: 64 - uint(bits.TrailingZeros(uint(n)))}
}

// add adds one. Goroutine stacks are at least 2 KiB apart, so the address of
// a local variable, shifted past that and hashed, tells goroutines apart; a
// stack that moves only changes the stripe, never the count.
func (c *counter) add() {
	c.stripes[c.stripe()].n.Add(1)
}

// stripe returns the calling goroutine's stripe.
func (c *counter) stripe() uint64 {
	var probe byte
	return uint64(uintptr(unsafe.Pointer(&probe))>>11) * 0x9E3779B97F4A7C15 >> c.shift
}

// load returns the sum over the stripes; adds racing with it may be missing.
func (c *counter) load() uint64 {
	var s uint64
	for i := range c.stripes {
		s += c.stripes[i].n.Load()
	}
	return s
}
