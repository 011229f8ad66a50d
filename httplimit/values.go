package httplimit

import (
	"hash/maphash"
	"strconv"
	"sync/atomic"
)

// valueCache keeps header values by their text, so that a response that
// carries the same text as an earlier one is given the same []string
// instead of a new string and a new slice. It is direct-mapped: the caller
// places a text in a slot, and the slot holds the last value placed there;
// a miss allocates what writing the header allocates without a cache, and
// takes the slot. It needs no lock: a value is never changed once in a
// slot, only replaced by another.
//
// The values are shared by every response that carries their text, so
// their slices have no room to append into (Header.Add makes a new one);
// a handler that wrote into one (Header()[name][0] = ...) would change the
// field of other responses.
type valueCache struct {
	slots []atomic.Pointer[[1]string]
}

// at returns b as a header value: slot i's (modulo the slots, a power of
// two) if it has b's text, else a new one that takes the slot.
func (c *valueCache) at(i uint64, b []byte) []string {
	slot := &c.slots[i&uint64(len(c.slots)-1)]
	if v := slot.Load(); v != nil && v[0] == string(b) {
		return v[:]
	}
	v := &[1]string{string(b)}
	slot.Store(v)
	return v[:]
}

// headerValues are the caches of the rate-limit header values a
// Middleware's Handler writes. A nil *headerValues makes a new value every
// time, as WriteHeaders does.
//
// They are apart so that the values that change with the buckets cannot
// push out those that the rules fix, and each places its texts by what
// varies in them: two values that differ only in their numbers differ in
// slot when their numbers are near, as the states of one bucket are. The
// memory is bounded: the slots, and one value of at most a few hundred
// bytes in each.
type headerValues struct {
	seed maphash.Seed
	// policy holds RateLimit-Policy, one value per combination of rules
	// that apply, placed by a hash of its text.
	policy valueCache
	// state holds RateLimit, placed by the hash of its RateLimit-Policy
	// (which names the same rules) plus its numbers: the same value for as
	// long as those rules' buckets are in the same state, as they are when
	// full again between requests.
	state valueCache
	// number holds the legacy fields' decimals, placed by their value.
	number valueCache
}

func newHeaderValues() *headerValues {
	return &headerValues{seed: maphash.MakeSeed(),
		policy: valueCache{make([]atomic.Pointer[[1]string], 64)},
		state:  valueCache{make([]atomic.Pointer[[1]string], 2048)},
		number: valueCache{make([]atomic.Pointer[[1]string], 256)}}
}

// policyValue returns RateLimit-Policy's value b, and where RateLimit's
// value for the same rules starts its placement.
func (v *headerValues) policyValue(b []byte) ([]string, uint64) {
	if v == nil {
		return []string{string(b)}, 0
	}
	h := maphash.Bytes(v.seed, b)
	return v.policy.at(h, b), h
}

// stateValue returns RateLimit's value b, placed at place.
func (v *headerValues) stateValue(b []byte, place uint64) []string {
	if v == nil {
		return []string{string(b)}
	}
	return v.state.at(place, b)
}

// numberValue returns x in decimal.
func (v *headerValues) numberValue(x int64) []string {
	if v == nil {
		return []string{strconv.FormatInt(x, 10)}
	}
	var b [20]byte
	return v.number.at(uint64(x), strconv.AppendInt(b[:0], x, 10))
}
