package shard

// This file holds all of the package's unsafe code: a bucket, its epoch, its
// generation and its key share one pointer-free heap object.
//
//	offset 0   word     uint64 (the Bucket)
//	offset 8   epoch    int32  (fixedpoint.Epoch; fixed for the object's life)
//	offset 12  gen      uint16 (the layout its word is packed in; fixed too)
//	offset 14  keyLen   uint16 (0xFFFF: the length is the uint32 at offset 16)
//	offset 16  key bytes (or offset 20 for keys of 65535 bytes and more)
//
// One allocation per key, with no pointers inside, so the garbage collector
// never scans it: 24 bytes for a key of up to 8 bytes, 32 up to 16.

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/faucetgo/faucet/fixedpoint"
)

const (
	epochOffset = 8
	genOffset   = 12
	lenOffset   = 14
	shortOffset = 16
	longOffset  = 20
	longMark    = 0xFFFF
	// minObject keeps objects out of the runtime's tiny allocator, which packs
	// objects under 16 bytes without 8-byte alignment.
	minObject = 16
)

// newBucket allocates a bucket of generation gen and epoch e holding w,
// followed by a copy of key.
func newBucket(key string, gen uint16, e fixedpoint.Epoch, w uint64) *Bucket {
	off := shortOffset
	if len(key) >= longMark {
		off = longOffset
	}
	buf := make([]byte, max(off+len(key), minObject))
	p := unsafe.Pointer(unsafe.SliceData(buf))
	*(*int32)(unsafe.Add(p, epochOffset)) = int32(e)
	*(*uint16)(unsafe.Add(p, genOffset)) = gen
	if off == shortOffset {
		*(*uint16)(unsafe.Add(p, lenOffset)) = uint16(len(key))
	} else {
		*(*uint16)(unsafe.Add(p, lenOffset)) = longMark
		*(*uint32)(unsafe.Add(p, shortOffset)) = uint32(len(key))
	}
	copy(buf[off:], key)
	b := (*Bucket)(p)
	b.word.Store(w)
	return b
}

// Epoch returns the bucket's epoch. Like the key it is written once, before
// the bucket is published, and never again.
func (b *Bucket) Epoch() fixedpoint.Epoch {
	return fixedpoint.Epoch(*(*int32)(unsafe.Add(unsafe.Pointer(b), epochOffset)))
}

// Gen returns the bucket's generation: which of its engine's layouts its
// word is packed in. It is written once, with the epoch.
func (b *Bucket) Gen() uint16 { return *(*uint16)(unsafe.Add(unsafe.Pointer(b), genOffset)) }

// key returns the bucket's key. The bytes are written once, before the bucket
// is published in an index, and never again, so reading them needs no
// synchronisation beyond the atomic load that found the bucket.
func (b *Bucket) key() string {
	p := unsafe.Pointer(b)
	n := uintptr(*(*uint16)(unsafe.Add(p, lenOffset)))
	off := uintptr(shortOffset)
	if n == longMark {
		n = uintptr(*(*uint32)(unsafe.Add(p, shortOffset)))
		off = longOffset
	}
	if n == 0 {
		// The empty key's object ends where its bytes would start: a
		// pointer there points past the allocation (checkptr rejects it).
		return ""
	}
	return unsafe.String((*byte)(unsafe.Add(p, off)), n)
}

// hasKey reports whether the bucket's key is key. Lookups call it for every
// tag match, so keys of 8 to 16 bytes, the usual ids and API keys, are
// compared as two overlapping 8-byte words read in place rather than through
// a call to the runtime's memequal; other lengths take the plain comparison.
func (b *Bucket) hasKey(key string) bool {
	p := unsafe.Pointer(b)
	n := uintptr(*(*uint16)(unsafe.Add(p, lenOffset)))
	if n != uintptr(len(key)) || n < 8 || n > 16 {
		return b.key() == key
	}
	// n <= 16 is below longMark, so the bytes start at shortOffset, 8-byte
	// aligned.
	mine := unsafe.Slice((*byte)(unsafe.Add(p, shortOffset)), n)
	theirs := unsafe.Slice(unsafe.StringData(key), n)
	return binary.LittleEndian.Uint64(mine) == binary.LittleEndian.Uint64(theirs) &&
		binary.LittleEndian.Uint64(mine[n-8:]) == binary.LittleEndian.Uint64(theirs[n-8:])
}

// compile-time check that the word is first and 8 bytes long.
var _ = [1]struct{}{}[unsafe.Offsetof(Bucket{}.word)]
var _ = [1]struct{}{}[unsafe.Sizeof(atomic.Uint64{})-8]
