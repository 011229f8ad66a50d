package engine

import "time"

// Decision is the outcome of one request for tokens. It is returned by value
// and allocates nothing.
type Decision struct {
	// Allowed reports whether the tokens were taken (always, for a cost of 0).
	Allowed bool
	// Remaining is the tokens left in the bucket after this decision, in
	// steps of 0.001. A denied request took nothing, so it is the tokens the
	// bucket holds; a request denied for capacity (FullDeny) reports 0. A
	// key that found the table full reports the overflow bucket's tokens.
	Remaining float64
	// RetryAfter is 0 when allowed; otherwise the wait after which the same
	// request would be allowed if nothing else touched the bucket, rounded up
	// to the engine's tick (never early); InfDuration if it can never be.
	// A wait too long for a Duration (from a time near -146 years to a
	// bucket stamped near +146 years) saturates at InfDuration-1.
	RetryAfter time.Duration
	// ResetAfter is the wait until the bucket is full again, if nothing else
	// touches it.
	ResetAfter time.Duration
}

// Precision describes the fixed-point units an Engine chose for its Burst.
type Precision struct {
	// Quantum is the smallest token amount: 0.001.
	Quantum float64
	// Tick is the time resolution of refill: decisions see times rounded
	// down to a multiple of Tick.
	Tick time.Duration
	// Horizon is the span of the packed timestamp past the base of a
	// bucket's epoch. A bucket whose own updates move it more than half a
	// Horizon to a Horizon past its base is replaced by one of a later
	// epoch, which costs one allocation; nothing else depends on it.
	Horizon time.Duration
}
