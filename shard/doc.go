// Package shard stores an engine's buckets: a table of cache-line-padded
// shards, each an open-addressing index from keys to buckets, and the
// lock-free take on a bucket's word.
//
// Package shard is an implementation detail of engine; its API may change
// without notice.
//
// # Concurrency
//
// Looking up an existing key takes no lock and allocates nothing: one atomic
// load of the shard's index, then, per probed 64-byte group, an atomic load
// of its tag word and, on a tag match, of the bucket pointer in the same
// cache line. Taking tokens is a CompareAndSwap loop on the bucket's one word
// (Bucket.Take), resolved against the bucket's own epoch, which sits in the
// same object. Every other write to a word is made by Bucket.Update (the
// same loop around the caller's computation), TombIf or Tomb, so the rules
// below hold whatever the caller computes. Inserting a key, evicting a
// bucket, replacing one by a bucket of a later epoch (Replace) and
// rebuilding an index take the shard's mutex; they never block lookups or
// takes. In the terms of the Go memory model, a bucket's creation (its word,
// epoch and key bytes) is synchronized before any lookup that finds it,
// because the pointer and then the tag are published by atomic stores.
//
// Eviction is a CompareAndSwap of the bucket's word to fixedpoint.Tomb
// (Bucket.TombIf), made only while the word shows a full bucket. A take that
// loaded the word before the eviction fails its own CompareAndSwap, reloads,
// sees the tomb and starts over with a fresh bucket; a take that landed
// first changes the word, so the eviction's CompareAndSwap fails and the
// bucket stays. No take is lost. Buckets are never reused: a tomb is final
// and its object is left to the garbage collector, so a goroutine still
// holding an evicted bucket can never write into another key's state.
//
// Replacement works the same way: the new bucket is built from the old word,
// the old word is swapped for the tomb by CompareAndSwap (Bucket.Tomb; a take
// that landed first makes it fail, and the state is computed again), and
// only then is the new bucket put in the old one's slot. A take holding the
// old bucket finds the tomb and looks the key up again.
//
// # Memory
//
// Per key: one pointer-free object holding the 8-byte word, the 4-byte epoch,
// a 2-byte length and the key bytes (24 bytes in all for keys of up to 10
// bytes, 32 up to 18), plus an index slot of 64/7 bytes (a 64-byte group
// holds 7 pointers and their tag bytes) at a load between a quarter and three
// quarters, about 16 bytes on average. That is about 49 bytes per key for
// 13-byte keys, key bytes included, against 72 for a plain
// map[string]uint64. Buckets are deliberately not padded: at a million keys a
// 64-byte pad each would cost 64 MB.
//
// Only the shard headers are padded (x/sys/cpu.CacheLinePad: 64 bytes on
// amd64, 128 on arm64), because every insert writes its shard's mutex.
//
// # Hashing
//
// The shard is picked by the top bits of xxhash.Sum64String(key), computed once
// per call. The slot within a shard comes from a seeded mix of that hash, with
// a seed per Table, so keys crafted to collide in one process's index collide
// nowhere else.
package shard
