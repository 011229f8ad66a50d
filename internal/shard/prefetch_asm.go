//go:build amd64 || arm64

package shard

import "unsafe"

// prefetch asks the CPU to start loading the cache line at p and returns at
// once. Unlike a load, a prefetch is not ordered by fences or locked
// instructions, so the line is in flight while the caller reads the clock.
//
//go:noescape
func prefetch(p unsafe.Pointer)
