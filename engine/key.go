package engine

import "crypto/sha256"

// MaxKeyBytes is the longest key a bucket stores as it is. Keys usually come
// from clients (header values, tokens, addresses), and a client that sends
// megabyte keys must not make a megabyte bucket each: a longer key is stored
// as a digest of itself (see BoundedKey), so every bucket costs the same
// whatever its key.
const MaxKeyBytes = 128

// digestMark starts every digested key. It is not a byte of any UTF-8 text,
// and a key that starts with it is digested too, whatever its length, so that
// no key stored as it is can equal another key's digest.
const digestMark = 0xFF

// BoundedKey returns key as buckets store it: key itself when it has at most
// MaxKeyBytes bytes and does not start with the byte 0xFF, and otherwise 0xFF
// followed by the 32 bytes of its SHA-256 (33 bytes). Distinct keys give
// distinct results, unless SHA-256 collides. The engine applies it to every
// key it is given; stores that keep buckets elsewhere (redisstore) apply it
// too, so that a key costs them at most MaxKeyBytes bytes as well.
//
// It is not idempotent: a digest starts with 0xFF and would be digested
// again. Apply it once, to the caller's key.
func BoundedKey(key string) string {
	if len(key) <= MaxKeyBytes && (len(key) == 0 || key[0] != digestMark) {
		return key
	}
	return digestKey(key)
}

// digestKey is kept out of line so that BoundedKey stays small enough to be
// inlined on the hot path, where keys are short.
//
//go:noinline
func digestKey(key string) string {
	// Hashed through a small buffer: []byte(key) would copy the whole key,
	// a megabyte for a megabyte key.
	h := sha256.New()
	var chunk [4096]byte
	for len(key) > 0 {
		n := copy(chunk[:], key)
		h.Write(chunk[:n])
		key = key[n:]
	}
	var b [1 + sha256.Size]byte
	b[0] = digestMark
	return string(h.Sum(b[:1]))
}
