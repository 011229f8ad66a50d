package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/lease"
)

// NewLeased returns a limiter that decides most checks in the instance from
// leases of l's shared buckets (package lease; the manual's
// docs/leases.md): every instance together admits at most Burst + Limit ×
// span in any span. The leased buckets live in the tables Install creates
// beside Table (Table_lease_buckets, Table_leases), apart from l's
// per-check buckets: a key leased by some instances and checked per call
// by others would be limited twice over. Bad options are an error wrapping
// ErrInvalidConfig.
func NewLeased(l *Limiter, opts lease.Options) (*lease.Leased, error) {
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
// statement, Table_lease, at the database's time.
func (l *Limiter) GrantLease(ctx context.Context, key string, r lease.Request) (lease.Grant, error) {
	return l.grantLease(ctx, key, r, nil)
}

// grantLease is GrantLease at microsecond at instead of the database's
// clock, when at is not nil (tests).
func (l *Limiter) grantLease(ctx context.Context, key string, r lease.Request, at *int64) (lease.Grant, error) {
	if l == nil {
		return lease.Grant{}, engine.ErrNilLimiter
	}
	us := r.TTL.Microseconds()
	if us <= 0 {
		return lease.Grant{}, fmt.Errorf("pgstore: lease TTL %v, want at least 1µs", r.TTL)
	}
	u := l.s.u
	var g lease.Grant
	var granted, tk, out int64
	var ended bool
	err := l.query(ctx, `SELECT * FROM `+ident(l.s.Table+"_lease")+`($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		[]any{[]byte(l.KeyFor(key)), int64(u.capacity), u.pArg, u.qArg, int64(r.Want), int64(r.Least), us, r.ID,
			r.Prev, int64(r.Unspent), l.s.lockMS, at},
		&g.Now, &granted, &g.At, &tk, &out, &g.Expiry, &g.LastEnd, &ended)
	if err != nil {
		return lease.Grant{}, err
	}
	if granted < 0 || tk < 0 || out < 0 || uint64(tk)+uint64(out) > u.capacity {
		return lease.Grant{}, fmt.Errorf("%w: a lease of %d from a leased bucket holding %d with %d out", errReply, granted, tk, out)
	}
	g.Quanta, g.Tokens, g.Out = uint64(granted), uint64(tk), uint64(out)
	if g.Quanta == 0 && r.Want > 0 {
		g.Wait = u.waitFor(g, r.Least)
	}
	return g, nil
}

// ReleaseLease ends lease id of key early, giving back unspent quanta
// (lease.Store): one statement, Table_release.
func (l *Limiter) ReleaseLease(ctx context.Context, key, id string, unspent uint64) (lease.Grant, bool, error) {
	return l.releaseLease(ctx, key, id, unspent, nil)
}

func (l *Limiter) releaseLease(ctx context.Context, key, id string, unspent uint64, at *int64) (lease.Grant, bool, error) {
	if l == nil {
		return lease.Grant{}, false, engine.ErrNilLimiter
	}
	u := l.s.u
	var g lease.Grant
	var tk, out int64
	var ended bool
	err := l.query(ctx, `SELECT * FROM `+ident(l.s.Table+"_release")+`($1, $2, $3, $4, $5, $6, $7, $8)`,
		[]any{[]byte(l.KeyFor(key)), int64(u.capacity), u.pArg, u.qArg, id, int64(unspent), l.s.lockMS, at},
		&g.Now, &ended, &g.At, &tk, &out)
	if err != nil {
		return lease.Grant{}, false, err
	}
	if tk < 0 || out < 0 || uint64(tk)+uint64(out) > u.capacity {
		return lease.Grant{}, false, fmt.Errorf("%w: a leased bucket holding %d with %d out", errReply, tk, out)
	}
	g.Tokens, g.Out = uint64(tk), uint64(out)
	return g, ended, nil
}

// FailLease is the Limiter's OnFailure answer for a take of n from key that
// a lease statement failed to decide with err (lease.Store).
func (l *Limiter) FailLease(key string, n float64, err error) (engine.Decision, error) {
	var out [1]engine.Decision
	_, err = l.fail([]engine.Take{{Limiter: l, Key: key, N: n}}, out[:], err, false)
	return out[0], err
}

// waitFor is the wait from g's time until the leased bucket can grant need
// quanta, if nothing else takes from it: its refill, after the last lease
// held ends if leases hold what the bucket lacks. Never early: the bucket
// holds at least what it holds now when the leases end.
func (u units) waitFor(g lease.Grant, need uint64) time.Duration {
	if need > u.capacity {
		return engine.InfDuration
	}
	wait := u.wait(g.At, g.Tokens, need, g.Now)
	if need > u.capacity-g.Out && g.LastEnd > g.Now {
		wait += time.Duration(g.LastEnd-g.Now) * time.Microsecond
	}
	return wait
}

// leasedOf is a store's leased limiter on l, which it owns: closing it
// closes l.
func leasedOf(l *Limiter, opts lease.Options) (engine.Limiter, error) {
	opts.CloseStore = true
	ls, err := NewLeased(l, opts)
	if err != nil {
		l.Close()
		return nil, err
	}
	return ls, nil
}
