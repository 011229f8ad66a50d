//go:build !amd64 && !arm64

package shard

import "unsafe"

// prefetch does nothing where the package has no prefetch instruction.
func prefetch(unsafe.Pointer) {}
