package redisstore

import (
	"context"
	"fmt"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
	"github.com/faucetgo/faucet/lease"
)

// LeaseOptions configures a Leased limiter (lease.Options); the zero value
// picks every default.
type LeaseOptions = lease.Options

// Leased is a limiter whose instances share one bucket per key in Redis and
// decide most checks locally, from leases of the shared bucket: package
// lease's limiter on a Limiter's leased buckets. Together the instances
// admit at most Burst + Limit × span in any span; see lease.Leased.
type Leased = lease.Leased

// NewLeased returns a Leased limiter on l's buckets configuration (Limit,
// Burst, Prefix, Timeout, OnFailure). Its buckets are apart from l's
// per-check ones: a key leased by some instances and checked per call by
// others would be limited twice over, not once. Bad options are an error
// wrapping ErrInvalidConfig.
func NewLeased(l *Limiter, opts LeaseOptions) (*Leased, error) {
	if l == nil {
		return nil, engine.ErrNilLimiter
	}
	if err := opts.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return lease.New(l, opts)
}

var _ lease.Store = (*Limiter)(nil)

// GrantLease grants a lease of key's leased bucket (lease.Store): one
// script, at Redis's time.
func (l *Limiter) GrantLease(ctx context.Context, key string, r lease.Request) (lease.Grant, error) {
	if l == nil {
		return lease.Grant{}, engine.ErrNilLimiter
	}
	g, err := l.lease(ctx, key, r.Want, r.Least, r.TTL, r.ID, r.Prev, r.Unspent)
	if err != nil {
		return lease.Grant{}, err
	}
	out := g.public()
	if g.quanta == 0 && r.Want > 0 {
		out.Wait = l.s.u.waitFor(g, r.Least)
	}
	return out, nil
}

// ReleaseLease ends lease id of key early, giving back unspent quanta
// (lease.Store).
func (l *Limiter) ReleaseLease(ctx context.Context, key, id string, unspent uint64) (lease.Grant, bool, error) {
	if l == nil {
		return lease.Grant{}, false, engine.ErrNilLimiter
	}
	ok, g, err := l.release(ctx, key, id, unspent)
	return g.public(), ok, err
}

// FailLease is the Limiter's OnFailure answer for a take of n from key that
// a lease call failed to decide with err (lease.Store).
func (l *Limiter) FailLease(key string, n float64, err error) (engine.Decision, error) {
	var out [1]engine.Decision
	_, fellBack := remote.Fail([]engine.Take{{Limiter: l, Key: key, N: n}}, out[:], coreOf)
	return out[0], storeError(err, remote.IsUnsent(err), fellBack)
}

// public is g in the lease contract's terms.
func (g grant) public() lease.Grant {
	return lease.Grant{Now: g.now, Quanta: g.quanta, Expiry: g.expiry, At: g.at, Tokens: g.tokens, Out: g.out, LastEnd: g.lastEnd}
}
