package shard

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// How a slot holds its key, in Bucket.meta above the 16 bits of the
// generation. A key of up to 16 bytes, the usual ids, addresses and API keys,
// sits in the slot itself, packed into two words, so that comparing it reads
// nothing outside the slot's line. A longer key sits in its index's long-key
// arena; the slot keeps the key's index hash, which rejects other keys
// without reading the arena, and the key's offset there.
const (
	genMask   = 0xFFFF
	occupied  = 1 << 16
	longKey   = 1 << 17
	lenShift  = 18 // the length of a key held in place, 0 to 16
	inlineMax = 16
)

// keyWords returns what a slot holding key (index hash m) has in meta,
// generation aside, and in its key words: the packed key, or for a long key
// m and a word that is no arena offset, so that comparing key words never
// matches and longMatch decides.
func keyWords(m uint64, key string) (meta uint32, k0, k1 uint64) {
	if len(key) > inlineMax {
		return occupied | longKey, m, ^uint64(0)
	}
	k0, k1 = packKey(key)
	return occupied | uint32(len(key))<<lenShift, k0, k1
}

// longMatch reports whether slot b of ix, published with meta, holds key
// when key is long (want and k0 are keyWords' meta and first word). The
// arena is loaded only after meta, which was stored after the key went into
// it.
func (ix *index) longMatch(b *Bucket, meta, want uint32, k0 uint64, key string) bool {
	return want&longKey != 0 && meta&^genMask == want && b.key[0] == k0 &&
		string(arenaKey(ix.arena(), b.key[1])) == key
}

// packKey packs a key of at most 16 bytes into two little-endian words,
// zero beyond its end, reading no byte past the key.
func packKey(key string) (k0, k1 uint64) {
	n := len(key)
	switch {
	case n >= 8:
		k0 = le64(key)
		// The last 8 bytes end at n; shifted down they put bytes 8..n-1 at
		// the bottom (a shift by 64, for n == 8, gives 0).
		k1 = le64(key[n-8:]) >> (8 * (16 - n))
	case n >= 4:
		// Two overlapping 4-byte loads; the bytes they share are equal.
		k0 = uint64(le32(key)) | uint64(le32(key[n-4:]))<<(8*(n-4))
	default:
		k0 = packShort(key)
	}
	return k0, k1
}

// packShort packs a key of at most 3 bytes.
func packShort(key string) (k uint64) {
	for i := len(key) - 1; i >= 0; i-- {
		k = k<<8 | uint64(key[i])
	}
	return k
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// inlineKey writes the key held in place in b (meta is b's) into buf and
// returns its bytes.
func inlineKey(b *Bucket, meta uint32, buf *[inlineMax]byte) []byte {
	binary.LittleEndian.PutUint64(buf[:8], b.key[0])
	binary.LittleEndian.PutUint64(buf[8:], b.key[1])
	return buf[:meta>>lenShift&0x1F]
}

// keyHash returns the Hash of the key slot b holds (meta is b's).
func keyHash(b *Bucket, meta uint32, long []byte) uint64 {
	if meta&longKey != 0 {
		return xxhash.Sum64(arenaKey(long, b.key[1]))
	}
	var buf [inlineMax]byte
	return xxhash.Sum64(inlineKey(b, meta, &buf))
}

// The long-key arena of an index holds each key of more than 16 bytes as a
// 4-byte little-endian length and the key's bytes. It only grows (a key is
// dropped with its index, at the next rebuild), and a grown arena is a copy,
// so an arena a reader loaded holds every key of every slot it can see.

// arenaKey returns the key at offset off of arena a.
func arenaKey(a []byte, off uint64) []byte {
	n := uint64(binary.LittleEndian.Uint32(a[off:]))
	return a[off+4 : off+4+n]
}

// appendLong copies key into ix's arena and returns its offset. The caller
// holds the shard's mutex; the slot that refers to the key is published
// after this returns, so the arena it reaches is this one or a later copy.
func (ix *index) appendLong(key []byte) uint64 {
	var a []byte
	if p := ix.long.Load(); p != nil {
		a = *p
	}
	need := ix.longUsed + 4 + len(key)
	if need > len(a) {
		grown := make([]byte, max(2*len(a), need, 256))
		copy(grown, a[:ix.longUsed])
		a = grown
		ix.long.Store(&grown)
	}
	off := ix.longUsed
	binary.LittleEndian.PutUint32(a[off:], uint32(len(key)))
	copy(a[off+4:], key)
	ix.longUsed = need
	return uint64(off)
}

// arena returns ix's long-key arena, nil while it has none.
func (ix *index) arena() []byte {
	if p := ix.long.Load(); p != nil {
		return *p
	}
	return nil
}
