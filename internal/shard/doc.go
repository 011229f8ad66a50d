// Package shard stores an engine's buckets: a table of cache-line-padded
// shards, each an open-addressing index whose 32-byte slots are the buckets
// themselves, and the lock-free take on a bucket's word.
//
// Package shard is an implementation detail of engine; its API may change
// without notice.
//
// # Layout
//
// A slot holds a key's word (the packed tokens and tick the take swaps), its
// epoch, its generation and, for a key of up to 16 bytes, the key itself;
// two slots fill a 64-byte line, and index arrays are aligned to lines. A
// lookup of an existing key reads the line its hash picks (and the next one
// when that is full of other keys), compares the key in place, and the take
// that follows swaps the word in the same line: one cache line per call,
// which is what a table larger than the caches pays for in memory latency.
// Table.Prefetch starts that line's load and returns a Probe that finishes
// the lookup later, so that an engine reads the clock while the line is on
// its way.
// A longer key keeps its index hash in the slot, which rejects other keys
// without leaving the line, and its bytes in an arena of the index, read
// once the hash matches.
//
// # Concurrency
//
// Looking up an existing key takes no lock and allocates nothing: one atomic
// load of the shard's index, then one atomic load of each probed slot's meta
// word, which publishes the slot, and plain reads of the key words written
// before it. Taking tokens is a CompareAndSwap loop on the slot's word
// (Bucket.Take), resolved against the slot's own epoch. Every other write to
// a word is made by Bucket.Update (the same loop around the caller's
// computation), TombIf or Tomb, so the rules below hold whatever the caller
// computes. Inserting a key, evicting a bucket, replacing one by a bucket of
// a later epoch (Replace) and rebuilding an index take the shard's mutex;
// they never block lookups or takes of keys they do not move.
//
// Eviction is a CompareAndSwap of the bucket's word to fixedpoint.Tomb
// (Bucket.TombIf), made only while the word shows a full bucket. A take that
// loaded the word before the eviction fails its own CompareAndSwap, reloads,
// sees the tomb and starts over with a fresh bucket; a take that landed
// first changes the word, so the eviction's CompareAndSwap fails and the
// bucket stays. No take is lost. A slot is never reused while its index
// lives: a tomb is final, and a goroutine still holding an evicted bucket can
// never write into another key's state.
//
// Replacement works the same way: the new state is computed from the old
// word, the old word is swapped for the tomb by CompareAndSwap (Bucket.Tomb;
// a take that landed first makes it fail, and the state is computed again),
// and only then is the new bucket published, in another slot. A take holding
// the old bucket finds the tomb and looks the key up again.
//
// Growing an index moves buckets, and a word must never be copied while a
// CompareAndSwap may still land on the original. So the rebuild, under the
// shard's mutex, swaps each live word for the tomb before it copies it: a
// take either landed before the swap, and its result is what is copied, or
// finds the tomb and looks again. A lookup on the old index then finds only
// tombs, and takes the key under the mutex, after the new index is out: while
// a shard is rebuilt, takes on its keys wait for the rebuild (a few hundred
// microseconds for a shard of a few thousand keys), as inserts always did.
//
// # Memory
//
// Per key: one 32-byte slot at a load between 0.58 and 0.75 (capacities grow
// by about 1.3, not 2, and are not powers of two: the line is picked by a
// multiply of the hash), 43 to 55 bytes, key bytes included up to 16. Keys of
// more than 16 bytes add 4 bytes and their own bytes in the arena. Index
// arrays hold no pointers, so the garbage collector never scans them,
// however many keys there are. Only the shard headers are padded
// (x/sys/cpu.CacheLinePad: 64 bytes on amd64, 128 on arm64), because every
// insert writes its shard's mutex.
//
// # Hashing
//
// The shard is picked by the top bits of xxhash.Sum64String(key), computed once
// per call. The line within a shard comes from a seeded mix of that hash, with
// a seed per Table, so keys crafted to collide in one process's index collide
// nowhere else.
package shard
