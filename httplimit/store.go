package httplimit

import (
	"context"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Limit is the bucket configuration of one rule, as a Store sees it.
type Limit struct {
	// ID names the rule's buckets: "<name>#<16 hex digits>", the digits a
	// hash of the rule's limit_keys and, unless the store is a Retuner, of
	// its rate and burst. It is printable ASCII without spaces. Two Limits
	// with the same ID share buckets, so a reload that keeps a rule's ID
	// keeps its buckets; a new ID's buckets start full.
	ID string
	// Name is the rule's name, as headers and metrics show it.
	Name string
	// Rate is the refill rate in tokens per second, from 1/31622400 to 1e9.
	Rate float64
	// Burst is the bucket capacity in tokens: at least Rate, from 1 to 1e9,
	// a multiple of 0.001.
	Burst float64
}

// Handle is what a Store's Bind returned for one Limit. Only the Store knows
// its dynamic type; a pointer keeps passing it around free of allocations.
type Handle any

// Take asks for N tokens from bucket Key of the limit bound to Handle.
type Take struct {
	Handle Handle
	// Key is the bucket's key within its limit. It may be empty: requests
	// that lack a rule's key share one bucket.
	Key string
	// N is the cost: finite and non-negative, possibly above the limit's
	// Burst (a take that can never pass).
	N float64
}

// Store keeps the token buckets of a Limiter's rules. NewMemoryStore is the
// in-process implementation; a distributed store implements the same
// contract, described in the package documentation.
type Store interface {
	// Bind prepares the buckets of l and returns a handle for TakeAll.
	// Binding an ID that is still bound must return a handle to the same
	// buckets (for a Retuner, whatever l's Rate and Burst: Retune applies
	// those). An error fails New or Reload, and the old rules stay in force.
	Bind(l Limit) (Handle, error)
	// Release undoes one Bind. Once every Bind of an ID is released the
	// store may drop its buckets; a TakeAll still in flight with the handle
	// must keep working.
	Release(h Handle)
	// TakeAll takes takes[i].N tokens from every bucket, or from none, at
	// time now (a store with its own clock may ignore now), and fills out
	// exactly as engine.AllowAllAt does. It returns the index of the denied
	// take, or -1. An error means the store could not decide: out and the
	// index are ignored and each rule's fail_mode applies.
	TakeAll(ctx context.Context, now time.Time, takes []Take, out []engine.Decision) (denied int, err error)
}

// Retuner is implemented by stores that can change the rate and burst of
// bound buckets in place; the IDs such a store gets leave rate and burst out
// (Limit.ID). New and Reload bind every rule of the new set, then, once all
// are bound, call Retune for each before the set takes effect. Binding is
// the step that may fail; Retune cannot, so a reload applies whole or not at
// all.
type Retuner interface {
	Store
	// Retune gives the buckets of h, which a Bind of l returned, l's Rate
	// and Burst at time now (a store with its own clock may ignore now):
	// every bucket keeps the tokens it holds at now, capped at a smaller
	// Burst, and refills at the new Rate from then on, as
	// engine.Engine.SetAt does; nothing is reset to full. Every handle of
	// the ID sees the change. A Retune to the Rate and Burst the buckets
	// already have changes nothing, so a change is applied once however
	// many handles hold it. Bind must refuse a Rate or Burst that Retune
	// could not apply.
	Retune(h Handle, l Limit, now time.Time)
}

// BucketStatser is implemented by stores that can count the buckets of a
// bound limit; Stats reports the counts.
type BucketStatser interface {
	// BucketStats returns the bucket counts of h; ok is false if the store
	// cannot tell.
	BucketStats(h Handle) (c BucketCounts, ok bool)
}

// BucketCounts are a store's counts for one bound limit.
type BucketCounts struct {
	// Live is the number of buckets held now.
	Live int
	// Evicted counts buckets dropped so far because they were full.
	Evicted uint64
	// Overflow counts takes on keys that found the store's key table full
	// (MemoryOptions.MaxKeys), decided by the overflow bucket or denied.
	Overflow uint64
}
