package lease

import (
	"context"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Store is the lease contract: what a shared store's Limiter provides so
// that Leased limiters can share its buckets. Quanta are thousandths of a
// token (fixedpoint.QuantaPerToken); times are microseconds of the store's
// clock. Every call runs atomically in the store at one reading of its
// clock, and first purges the key's expired leases (their quanta are
// forfeited) and refills the leased bucket up to Burst less the quanta
// unexpired leases hold. Leased buckets are apart from per-check ones.
type Store interface {
	// Limit and Burst are the shared buckets' rate and capacity.
	Limit() engine.Limit
	Burst() float64
	// GrantLease ends the lease r.Prev of key if it is held (its
	// unspent quanta, at most what it holds, back in the bucket), then
	// grants min(r.Want, the bucket's quanta) for r.TTL under r.ID if that
	// is at least r.Least and above 0, else nothing. r.Want 0 only reports
	// the bucket. A call that changes nothing writes nothing.
	GrantLease(ctx context.Context, key string, r Request) (Grant, error)
	// ReleaseLease ends lease id of key early, giving back unspent quanta
	// (at most what it holds); it reports whether the lease was still held
	// (an expired one gives nothing back). The Grant is the bucket after.
	ReleaseLease(ctx context.Context, key, id string, unspent uint64) (Grant, bool, error)
	// FailLease is the answer of the store's failure policy for a take of
	// n from key that the store could not decide with err, and the error
	// to return: wrapping engine.ErrUnavailable when nothing was taken for
	// certain, else engine.ErrOutcomeUnknown, and engine.ErrFallback when
	// a local engine decided.
	FailLease(key string, n float64, err error) (engine.Decision, error)
}

// Request is a grant's arguments.
type Request struct {
	// Want is the quanta asked for; 0 only reports. Least is the fewest
	// worth granting.
	Want, Least uint64
	// TTL is the lease's lifetime on the store's clock, at least 1 µs.
	TTL time.Duration
	// ID names the lease (no spaces), unique among the key's leases.
	ID string
	// Prev, if not "", is a lease of the caller's to end first, with
	// Unspent quanta back in the bucket.
	Prev    string
	Unspent uint64
}

// Grant is a store's answer: what was granted and the bucket after.
type Grant struct {
	// Now is the store's clock at the call, in microseconds.
	Now int64
	// Quanta is what was granted (0 for nothing); Expiry the microsecond
	// the lease ends at (0 if none).
	Quanta uint64
	Expiry int64
	// At and Tokens are the bucket's tick and quanta after the call; Out
	// is the quanta every unexpired lease holds, this one included.
	At     int64
	Tokens uint64
	Out    uint64
	// LastEnd is, when nothing was granted, the microsecond the last
	// lease held ends at (0 if none).
	LastEnd int64
	// Wait is, when nothing was granted, how long from Now until the
	// bucket could grant Least if nothing else took from it: its refill,
	// after the last lease ends if leases hold what it lacks. Never early.
	Wait time.Duration
}
