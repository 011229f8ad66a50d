package pgstore

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
	"github.com/faucetgo/faucet/internal/remote"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is what a Limiter needs of a connection: *pgxpool.Pool (use one: it is
// safe for concurrent use and replaces broken connections) or *pgx.Conn
// (for a single goroutine), never a transaction (pgx.Tx), whose rollback
// would undo takes that were answered.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Limiter is a token-bucket rate limiter whose buckets live in a PostgreSQL
// table, shared by every process that uses the same database, Table, Prefix
// and limit. It implements engine.Limiter and is safe for concurrent use.
type Limiter struct {
	s  *settings
	db DB
	// conn identifies the database handle: Limiters with equal conns are
	// decided together in one TakeAll.
	conn any
	// core calls the database under the deadline and the breaker,
	// counts, and holds the failure policy's fallback engine.
	core *remote.Core
	// lastOK is when a statement last succeeded (Unix ns), written at
	// most once a millisecond: a miss while the pool grows counts for the
	// breaker only if none succeeded within Timeout.
	lastOK atomic.Int64
	co     coalescer
	// quota, if not nil, makes the Limiter a calendar quota's (see
	// Quota): its takes go through take_all, never coalesced.
	quota *remote.Quota
	// window, if not nil, makes the Limiter a strict window's (see
	// Window): its takes go through take_all, never coalesced.
	window *remote.Window
}

var _ engine.Limiter = (*Limiter)(nil)

// Stats is a snapshot of a Limiter's counters.
type Stats struct {
	// Allowed and Denied count the decisions the database made.
	Allowed, Denied uint64
	// StoreErrors counts takes the store failed to decide (a TakeAll
	// counts each of its takes in its own Limiter), the breaker's answers
	// included.
	StoreErrors uint64
	// FailedOpen, FailedClosed and Fallback count how the policy answered
	// them.
	FailedOpen, FailedClosed, Fallback uint64
	// Skipped counts statements not sent because the breaker was open.
	Skipped uint64
	// Calls counts the statements this Limiter sent.
	Calls uint64
}

// Stats returns the Limiter's counters.
func (l *Limiter) Stats() Stats {
	c := &l.core.Counters
	return Stats{
		Allowed: c.Allowed.Load(), Denied: c.Denied.Load(), StoreErrors: c.StoreErrors.Load(),
		FailedOpen: c.FailedOpen.Load(), FailedClosed: c.FailedClosed.Load(), Fallback: c.Fallback.Load(),
		Skipped: c.Skipped.Load(), Calls: c.Calls.Load(),
	}
}

// ErrBreakerOpen is wrapped by the errors of calls the open breaker answered
// without asking the database (Config.BreakAfter).
var ErrBreakerOpen = errors.New("pgstore: breaker open after consecutive failures")

// New returns a Limiter that keeps its buckets in the database behind db,
// in cfg.Table, which Install must have created. The Limiter does not own
// db: Close leaves it open.
func New(db DB, cfg Config) (*Limiter, error) {
	s, core, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if isNil(db) {
		core.Close()
		return nil, invalid("db must not be nil")
	}
	l := &Limiter{s: s, db: db, core: core}
	l.conn = remote.Conn(db, l)
	return l, nil
}

// isNil reports whether db is nil or a nil pointer.
func isNil(db DB) bool {
	v := reflect.ValueOf(db)
	return db == nil || v.Kind() == reflect.Pointer && v.IsNil()
}

// Close releases the fallback engine, if any; it does not close db. Takes
// after Close still work.
func (l *Limiter) Close() error {
	if l == nil {
		return engine.ErrNilLimiter
	}
	return l.core.Close()
}

// Limit returns Config.Limit. The store refills at exactly that rate.
func (l *Limiter) Limit() engine.Limit { return l.s.Limit }

// Burst returns Config.Burst.
func (l *Limiter) Burst() float64 { return l.s.Burst }

// Config returns the Limiter's configuration with defaults applied.
func (l *Limiter) Config() Config { return l.s.Config }

// KeyFor returns the key of key's row in the table: Prefix, a tag naming
// the limit (16 hex digits of a hash of its capacity and rate), ':', then the
// key, replaced by its SHA-256 when longer than engine.MaxKeyBytes so that a
// row costs the same whatever the key. Keys are bytes (bytea): any key,
// invalid UTF-8 and NUL bytes included, is its own.
func (l *Limiter) KeyFor(key string) string {
	return l.s.keyBase + engine.BoundedKey(key)
}

// Allow takes one token from key's bucket if it holds one. On a store
// failure it returns the policy's answer.
func (l *Limiter) Allow(ctx context.Context, key string) bool {
	d, _ := l.Take(ctx, key, 1)
	return d.Allowed
}

// Take takes n tokens from key's bucket at the database's time if it holds
// them, with exactly engine.Engine.AllowN's Decision: n may be fractional
// (0.001 resolution), 0 peeks, and n above Burst, negative or NaN is denied
// with RetryAfter engine.InfDuration without a write. One statement, one
// round trip, shared with the key's other takes that arrive while the
// key's previous statement is in flight (see Coalescing in the package
// documentation).
//
// A non-nil error means the store could not decide; the Decision is then
// Config.OnFailure's answer. The error wraps engine.ErrUnavailable when
// nothing was taken for certain (the breaker was open, the context had
// ended, the statement was not sent or failed in the database, or n takes
// nothing), else engine.ErrOutcomeUnknown (the connection was lost or the
// deadline passed after the statement was sent: it may have committed).
// With OnFailure Fallback it also wraps engine.ErrFallback: the local engine
// decided, and the Decision stands.
func (l *Limiter) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	if l == nil {
		return engine.Decision{}, engine.ErrNilLimiter
	}
	var out [1]engine.Decision
	_, _, err := l.takeAll(ctx, []engine.Take{{Limiter: l, Key: key, N: n}}, out[:], nil)
	return out[0], err
}

// Tokens returns the tokens key's bucket holds now, without taking any or
// writing anything.
func (l *Limiter) Tokens(ctx context.Context, key string) (float64, error) {
	d, err := l.Take(ctx, key, 0)
	return d.Remaining, err
}

// query runs a statement with the Limiter's deadline and breaker
// (remote.Core.Call), scanning its one row into dst.
func (l *Limiter) query(ctx context.Context, sql string, args []any, dst ...any) error {
	return l.core.Call(ctx, func(ctx context.Context) error { return l.run(ctx, sql, args, dst) }, l.counts)
}

// counts notes a statement's success and reports whether its outcome
// tells the breaker about the database.
func (l *Limiter) counts(err error) bool {
	now := time.Now().UnixNano()
	if err == nil && now-l.lastOK.Load() > int64(time.Millisecond) {
		l.lastOK.Store(now)
	}
	var g growing
	// A pool still opening connections for a burst while the database
	// answers the statements on those open says nothing about it; one
	// that answers none is stalled, and the miss counts.
	busy := errors.As(err, &g) && now-l.lastOK.Load() <= int64(l.s.Timeout)
	// A row held by a stuck transaction says nothing about the database
	// either: one hot key must not lift every key's limit.
	return !keyLevel(err) && !busy
}

// acquirer is a pool: *pgxpool.Pool.
type acquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// run sends the statement and scans its row. From a pool it acquires the
// connection first, so that a failure to get one (the server refuses
// connections, the pool stays exhausted until the deadline) is known to
// have sent nothing.
func (l *Limiter) run(ctx context.Context, sql string, args []any, dst []any) error {
	db := l.db
	if p, ok := db.(acquirer); ok {
		c, err := p.Acquire(ctx)
		if err != nil {
			if s, ok := db.(statter); ok && ctx.Err() != nil && s.Stat().ConstructingConns() > 0 {
				return growing{remote.Unsent{Err: err}}
			}
			return remote.Unsent{Err: err}
		}
		defer c.Release()
		db = c
	}
	err := db.QueryRow(ctx, sql, args...).Scan(dst...)
	if err != nil && unsent(err) {
		err = remote.Unsent{Err: err}
	}
	return err
}

// statter is a pool that reports its connections: *pgxpool.Pool.
type statter interface {
	Stat() *pgxpool.Stat
}

// growing marks a deadline that passed while waiting for a connection the
// pool was still opening: under a burst of new keys on a loaded machine,
// opening one can outlast a check's deadline while the database is
// healthy. The check fails (nothing was taken); the breaker counts it only
// if no statement succeeded within the Timeout before it, as none does
// when the database stalls or refuses connections.
type growing struct{ remote.Unsent }

func (e growing) Unwrap() error { return e.Unsent }

// keyLevel reports whether err is about one bucket's row rather than the
// database: a lock held past lock_timeout, a deadlock or serialization
// failure.
func keyLevel(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "55P03", "40P01", "40001":
		return true
	}
	return false
}

// unsent reports whether err proves that nothing was taken: the statement
// was never sent (pgconn.SafeToRetry, a failed connection attempt), or the
// database answered it with an ERROR, which rolls the statement back (a
// statement timeout, a lock timeout, a missing function). A FATAL is not
// proof: a backend terminated while it waits for a synchronous standby has
// committed locally. Nor is a connection lost after sending, or a deadline
// that passed while waiting for the reply: the statement may have
// committed.
func unsent(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	if ce := (*pgconn.ConnectError)(nil); errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Severity == "ERROR"
}

// storeError is the error returned for a failed call (failpolicy.Error):
// nothing was taken when the caller knows it or err says so.
func storeError(err error, nothingTaken, fellBack bool) error {
	return failpolicy.Error("pgstore", err, nothingTaken || remote.IsUnsent(err), fellBack)
}
