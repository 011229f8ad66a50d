package bench

import (
	"fmt"
	"math/rand/v2"
	"sync"
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
