package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// keys13 returns n distinct 13-byte keys ("key:000000042"), the shape of a
// short API key or user id; sequences of n keys are cached across benchmarks.
func keys13(n int) []string {
	keyCache.Lock()
	defer keyCache.Unlock()
	if k, ok := keyCache.m[n]; ok {
		return k
	}
	k := make([]string, n)
	for i := range k {
		k[i] = fmt.Sprintf("key:%09d", i)
	}
	keyCache.m[n] = k
	return k
}

var keyCache = struct {
	sync.Mutex
	m map[int][]string
}{m: map[int][]string{}}

// seqLen is the length of a precomputed access sequence; the loop walks it
// round and round, so generating indices costs nothing inside the timing.
const seqLen = 1 << 20

// uniformSeq returns seqLen indices below n, uniformly random.
func uniformSeq(n int) []int32 {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	s := make([]int32, seqLen)
	for i := range s {
		s[i] = int32(rng.IntN(n))
	}
	return s
}

// zipfSeq returns seqLen indices below n with a Zipf distribution (s = 1.1):
// a few hot keys and a long tail, as real traffic per client looks.
func zipfSeq(n int) []int32 {
	rng := rand.New(rand.NewPCG(2, uint64(n)))
	z := rand.NewZipf(rng, 1.1, 1, uint64(n-1))
	s := make([]int32, seqLen)
	for i := range s {
		// Scatter the ranks so that hot keys are not neighbours in memory.
		s[i] = int32((z.Uint64() * 2654435761) % uint64(n))
	}
	return s
}

// callKeys returns the keys a timed loop passes, one per position of seq:
// fresh copies of keys[seq[i]], laid out one after another in call order.
//
// A server looks a key up with bytes it has just parsed from a request: they
// are in cache, and they are never the very string the limiter stored. Timing
// keys[seq[i]] instead would charge every implementation two cache misses of
// the harness's own per call (the string header and its bytes, at random
// places in 30 MB), and would let maps that compare keys with == skip reading
// their stored key, since a string equals itself without a look at its bytes
// (runtime memequal checks the pointers first). The copies, read in order,
// are prefetched, and every comparison reads the stored bytes as it would in
// production.
func callKeys(keys []string, seq []int32) []string {
	var buf strings.Builder
	for _, i := range seq {
		buf.WriteString(keys[i])
	}
	all := buf.String()
	out := make([]string, len(seq))
	off := 0
	for j, i := range seq {
		n := len(keys[i])
		out[j] = all[off : off+n]
		off += n
	}
	return out
}

// inOrder returns the sequence 0, 1, ..., n-1.
func inOrder(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(i)
	}
	return s
}

// filled returns a limiter of im, closed when b ends, that admits every call
// and holds a live bucket for each of n 13-byte keys (keys13(n), returned).
func filled(b *testing.B, im impl, n int) (limiter, []string) {
	l, closeFn := im.new(limitFor(im, "allow"))
	if closeFn != nil {
		b.Cleanup(closeFn)
	}
	keys := keys13(n)
	for _, k := range keys {
		l.allow(k)
	}
	return l, keys
}
