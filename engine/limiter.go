package engine

import (
	"context"
	"errors"
	"time"
)

// Limiter is the contract every faucet limiter implements: the in-memory
// Engine, the Redis limiter of package redisstore, and any other store.
// Layers above it, such as httplimit, accept any Limiter; a new store is
// complete when it passes the conformance suite in package limitertest.
//
// A Limiter keeps one token bucket per key, all with the same Limit and
// Burst. Every bucket starts full. The semantics of a take are those of
// Engine.AllowAt, whatever the store:
//   - n tokens are taken if the bucket holds them, else nothing is taken;
//   - n == 0 peeks: allowed, nothing taken;
//   - n above Burst, negative, NaN or infinite is denied with RetryAfter
//     InfDuration and changes nothing;
//   - a denial changes nothing, so polling does not delay the refill;
//   - Remaining, RetryAfter and ResetAfter are as Decision describes them.
//
// A denial is a Decision, never an error. An error means the limiter could
// not decide, and the caller applies its own failure policy; the Decision
// holds the limiter's failure answer, if it has one of its own, for callers
// without a policy. An error that wraps ErrFallback is the exception: a
// local fallback decided in the store's place, and the Decision stands.
// Errors wrap ErrUnavailable (nothing was taken: safe to retry),
// ErrOutcomeUnknown (the store may have taken the tokens: a retry may
// charge twice), ErrNilLimiter, ErrShortOut or ErrForeignTake, so that
// errors.Is classifies them whatever the store.
type Limiter interface {
	// Take takes n tokens from key's bucket, or none.
	Take(ctx context.Context, key string, n float64) (Decision, error)
	// TakeAll takes takes[i].N tokens from every takes[i].Key's bucket of
	// takes[i].Limiter, or from none, and fills out[i] for every take; it
	// returns the index of the denied take, or -1 when all were taken (and
	// for no takes). The exact guarantee is Engine.TakeAllAt's; a remote
	// store documents where its own differs. Every takes[i].Limiter must be
	// one this limiter can decide together with itself (for the Engine, any
	// Engine or Multi of Engines; for a remote store, its limiters on the
	// same connection): otherwise the error wraps ErrForeignTake and nothing
	// is taken.
	TakeAll(ctx context.Context, takes []Take, out []Decision) (denied int, err error)
	// Limit is the refill rate in tokens per second.
	Limit() Limit
	// Burst is the capacity of every bucket, in tokens.
	Burst() float64
	// Close releases what the limiter holds (a sweeper, a connection's
	// state). Takes after Close still work, as far as the store allows.
	Close() error
}

// Take is one part of a TakeAll: N tokens from Key's bucket of Limiter.
type Take struct {
	Limiter Limiter
	Key     string
	N       float64
	// Calendar, for a take from a calendar quota (Quota), is the key's
	// own calendar: where its periods begin, if not where the quota's do
	// (a customer's billing day, in their time zone). nil: the quota's.
	// Other limiters ignore it.
	Calendar *Calendar
}

// TakerAt is implemented by limiters whose time the caller may give: the
// Engine. Tests, simulations and layers with a clock of their own (httplimit's
// Options.Now) use it; a store that keeps time itself, such as Redis, does
// not implement it, and callers then use TakeAll, at the store's time.
type TakerAt interface {
	Limiter
	// TakeAllAt is TakeAll at time t.
	TakeAllAt(t time.Time, takes []Take, out []Decision) (denied int, err error)
}

// Retuner is implemented by limiters that change their Limit and Burst in
// place, keeping every bucket's tokens: the Engine (Engine.SetAt).
type Retuner interface {
	Limiter
	// SetAt gives every bucket limit and burst from time t on: each keeps
	// the tokens it holds at t, capped at a smaller burst. It fails, changing
	// nothing, for a limit or burst that CheckLimit refuses.
	SetAt(t time.Time, limit Limit, burst float64) error
}

var (
	// ErrNilLimiter is returned by the methods of a nil Engine that return
	// an error, and by TakeAll for a Take whose Limiter is nil.
	ErrNilLimiter = errors.New("engine: nil limiter")
	// ErrShortOut is returned by TakeAll when out has fewer elements than
	// takes; nothing is taken.
	ErrShortOut = errors.New("engine: out is shorter than takes")
	// ErrForeignTake is returned by TakeAll when a take names a limiter that
	// the receiver cannot decide together with itself (an Engine given a
	// Redis limiter, or limiters on different Redis connections); nothing is
	// taken.
	ErrForeignTake = errors.New("engine: a take's limiter cannot be decided together with the others")
	// ErrUnavailable is wrapped by the errors of a store that certainly took
	// nothing: it could not be reached, or refused the call. Retrying is
	// safe.
	ErrUnavailable = errors.New("store unavailable (nothing taken)")
	// ErrOutcomeUnknown is wrapped by the errors of a store that may have
	// taken the tokens: a call that timed out or lost its connection after
	// it was sent. A retry may take them twice.
	ErrOutcomeUnknown = errors.New("store outcome unknown (tokens may have been taken)")
	// ErrFallback is wrapped, beside the store's error, by the errors of a
	// call that a local fallback decided while the store failed: its
	// Decisions are the fallback's and stand.
	ErrFallback = errors.New("decided by the local fallback")
)

var (
	_ Limiter = (*Engine)(nil)
	_ TakerAt = (*Engine)(nil)
	_ Retuner = (*Engine)(nil)
)

// Take is AllowN, for callers that hold a Limiter: it takes n tokens from
// key's bucket now if it holds them. The error is nil unless e is nil: an
// Engine decides in memory, never blocks and ignores ctx. It allocates nothing
// for a key that has a bucket.
func (e *Engine) Take(_ context.Context, key string, n float64) (Decision, error) {
	if e == nil {
		return Decision{}, ErrNilLimiter
	}
	return e.decide(e.nanosNow(), key, n), nil
}

// TakeAll is TakeAllAt with each engine's monotonic clock. Every take's
// Limiter must be an *Engine or a Multi of Engines; the receiver only names
// the implementation and may be any Engine, or nil.
func (e *Engine) TakeAll(_ context.Context, takes []Take, out []Decision) (int, error) {
	return takeAll(time.Time{}, false, takes, out)
}
