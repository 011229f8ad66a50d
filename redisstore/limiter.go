package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/remote"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Limiter is a token-bucket rate limiter whose buckets live in Redis, shared
// by every process that uses the same server (or cluster), Prefix and
// Config. It implements engine.Limiter and is safe for simultaneous use.
type Limiter struct {
	s *settings
	c client
	// conn identifies the client: Limiters with equal conns can be decided
	// together in one TakeAll.
	conn any
	// core calls Redis under the deadline and the breaker, counts, and
	// holds the failure policy's fallback engine.
	core *remote.Core
	// batches reports that concurrent Take calls share scripts (see
	// batch.go): MaxBatch above 1 on a client that is not a cluster's.
	batches bool
	batch   batcher
	// escape makes KeyFor escape '{', '}' and '%' in keys (escapeKey)
	// before anything else: set by NewStore, whose keys come from requests.
	escape bool
	// quota, if not nil, makes the Limiter a calendar quota's (see Quota):
	// its takes go through takeScript, never batched.
	quota *remote.Quota
	// window, if not nil, makes the Limiter a strict window's (see
	// Window): its takes go through takeScript, never batched.
	window *remote.Window
}

var _ engine.Limiter = (*Limiter)(nil)

// Stats is a snapshot of a Limiter's counters.
type Stats struct {
	// Allowed and Denied count the decisions Redis made.
	Allowed, Denied uint64
	// StoreErrors counts takes the store failed to decide (a TakeAll
	// counts each of its takes in its own Limiter): errors, timeouts, and
	// those the open breaker answered without asking Redis.
	StoreErrors uint64
	// FailedOpen, FailedClosed and Fallback count how the policy answered
	// those calls: allowed unchecked, denied, or decided by the local engine.
	FailedOpen, FailedClosed, Fallback uint64
	// Skipped counts scripts this Limiter did not send because its breaker
	// was open (one per Take; a TakeAll's are counted by the Limiter it
	// was called on).
	Skipped uint64
	// Scripts counts the scripts this Limiter sent to Redis, takes and
	// give-backs: (Allowed+Denied)/Scripts is the mean batch of checks
	// (see Config.MaxBatch).
	Scripts uint64
}

// New returns a Limiter that keeps its buckets in Redis through client, a
// rueidis client (standalone, sentinel or cluster). The Limiter does not own
// the client: Close leaves it open.
func New(client rueidis.Client, cfg Config) (*Limiter, error) {
	if client == nil {
		return nil, nilClient(cfg)
	}
	return newLimiter(rueClient{client}, cfg)
}

// NewGoRedis is New for an existing go-redis v9 client (*redis.Client,
// *redis.ClusterClient, *redis.Ring ...). Do not pass a client with the
// experimental auto-pipelining enabled: it may send a script twice, and a
// take made twice is a token spent twice. go-redis ignores context
// deadlines unless the client's options set ContextTimeoutEnabled; without
// it Config.Timeout cannot cut a call short, and a slow server delays each
// call by up to the client's ReadTimeout (3 s by default). go-redis also
// retries a call whose connection failed (Options.MaxRetries, 3 by
// default), even after the script was sent, which may take its tokens twice
// and leaves no error certain that nothing was taken: the store's errors
// wrap engine.ErrUnavailable for a failed dial or a refusal by Redis only
// with a *redis.Client whose MaxRetries is -1 (the breaker's and a done
// context's always do).
func NewGoRedis(client redis.UniversalClient, cfg Config) (*Limiter, error) {
	if client == nil {
		return nil, nilClient(cfg)
	}
	return newLimiter(goRedisClient{client}, cfg)
}

// nilClient is the error for a nil client: the Config's own error first, as
// it names a field.
func nilClient(cfg Config) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	return invalid("client must not be nil")
}

func newLimiter(c client, cfg Config) (*Limiter, error) {
	s, core, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	l := &Limiter{s: s, c: c, core: core, batches: s.maxBatch > 1 && !c.sharded()}
	// A client value that cannot be compared cannot be told apart from
	// another: this Limiter then decides TakeAlls alone.
	l.conn = remote.Conn(c.conn(), l)
	return l, nil
}

// Close releases the fallback engine, if any. It does not close the client.
// Takes after Close still work; with OnFailure Fallback, the fallback engine
// still decides them while the store fails (it only stops sweeping).
func (l *Limiter) Close() error {
	if l == nil {
		return engine.ErrNilLimiter
	}
	return l.core.Close()
}

// Limit returns Config.Limit, the refill rate in tokens per second. The
// store refills at exactly that rate, or a hair below it (see Exact).
func (l *Limiter) Limit() engine.Limit { return l.s.Limit }

// Burst returns Config.Burst, the capacity of every bucket in tokens.
func (l *Limiter) Burst() float64 { return l.s.Burst }

// Config returns the Limiter's configuration with defaults applied.
func (l *Limiter) Config() Config { return l.s.Config }

// Exact reports whether the store's rate fraction equals Limit exactly (see
// the package documentation, Units); when false it is slightly lower.
func (l *Limiter) Exact() bool { return l.s.u.exact }

// KeyFor returns the Redis key of key's bucket. It starts with Prefix and a
// tag that names the Limit and Burst (16 hex digits of a hash of the
// script's units), so that limiters with different limits never read or
// write each other's buckets, whatever their Prefix; then ":{" + key + "}",
// so that the key is its own Redis Cluster hash tag. A key that already holds
// a hash tag (a '{' followed later by a '}' with something between) follows
// the tag with "=" instead and keeps its own braces, so that callers choose
// which keys share a slot: "{tenant7}:user42" and "{tenant7}" do. A key
// longer than engine.MaxKeyBytes is replaced by its digest first
// (engine.BoundedKey), so that a bucket costs Redis the same whatever its
// key; such a key's own hash tag no longer counts.
func (l *Limiter) KeyFor(key string) string {
	if l.escape {
		key = escapeKey(key)
	}
	key = engine.BoundedKey(key)
	if _, _, ok := hashTag(key); ok {
		return l.s.keyBase + "=" + key
	}
	return l.s.keyBase + ":{" + key + "}"
}

// Allow reports whether one token may be taken from key's bucket now, and
// takes it if so. On a store failure it returns the policy's answer.
func (l *Limiter) Allow(ctx context.Context, key string) bool {
	d, _ := l.Take(ctx, key, 1)
	return d.Allowed
}

// Take takes n tokens from key's bucket at the Redis server's time if it
// holds them, with exactly engine.Engine.AllowN's Decision: n may be
// fractional (0.001 resolution), 0 peeks, and n above Burst, negative or NaN
// is denied with RetryAfter engine.InfDuration without a write.
//
// A non-nil error means the store could not decide (it failed, or the
// breaker is open); the Decision is then the answer of Config.OnFailure. The
// error wraps engine.ErrUnavailable when nothing was taken for certain (the
// breaker was open, the context had ended before the call was sent, the
// connection was refused (see NewGoRedis for go-redis), or n takes nothing:
// a peek, an impossible cost), else engine.ErrOutcomeUnknown (a call that timed out or lost its
// connection after it was sent may have run). With OnFailure Fallback it
// also wraps engine.ErrFallback: the local engine decided, and the Decision
// stands. A nil Limiter returns engine.ErrNilLimiter.
//
// Calls made while the Limiter already waits for replies share scripts (see
// Config.MaxBatch).
func (l *Limiter) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	if l == nil {
		return engine.Decision{}, engine.ErrNilLimiter
	}
	d, _, err := l.takeOne(ctx, key, n)
	return d, err
}

// Tokens returns the tokens key's bucket holds now (Burst for a key without
// a bucket). It writes nothing.
func (l *Limiter) Tokens(ctx context.Context, key string) (float64, error) {
	d, err := l.Take(ctx, key, 0)
	if err != nil {
		return 0, err
	}
	return d.Remaining, nil
}

// Stats returns the Limiter's counters.
func (l *Limiter) Stats() Stats {
	c := &l.core.Counters
	return Stats{
		Allowed:      c.Allowed.Load(),
		Denied:       c.Denied.Load(),
		StoreErrors:  c.StoreErrors.Load(),
		FailedOpen:   c.FailedOpen.Load(),
		FailedClosed: c.FailedClosed.Load(),
		Fallback:     c.Fallback.Load(),
		Skipped:      c.Skipped.Load(),
		Scripts:      c.Calls.Load(),
	}
}

// call runs a script under the Limiter's deadline and keeps the breaker
// (remote.Core.Call). Its error is a remote.Unsent when the script
// certainly did not run.
func (l *Limiter) call(ctx context.Context, s script, keys, args []string) ([]int64, error) {
	var v []int64
	err := l.core.Call(ctx, func(ctx context.Context) error {
		var err error
		v, err = l.c.run(ctx, s, keys, args)
		if err != nil && l.c.unsent(err) {
			err = remote.Unsent{Err: err}
		}
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// ErrBreakerOpen is the error of a call the breaker answered without asking
// Redis, after Config.BreakAfter consecutive failures. The errors that wrap
// it also wrap engine.ErrUnavailable.
var ErrBreakerOpen = fmt.Errorf("redisstore: breaker open after consecutive store failures")

// refused reports the errors of one attempt to run a script that mean it
// did not run: a failed dial (no connection to send it on), and the replies
// with which Redis refuses a command before running it while it loads its
// data set (LOADING), runs another script (BUSY) or is a replica that lost
// its primary (MASTERDOWN). Every other error, a timeout or a lost
// connection above all, may come after the script ran. (client.unsent
// decides whether a client's error is one attempt's.)
func refused(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	msg := err.Error()
	for _, prefix := range []string{"LOADING ", "BUSY ", "MASTERDOWN "} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// storeError is the error a call returns when the store could not decide
// (failpolicy.Error).
func storeError(err error, nothingTaken, fellBack bool) error {
	return failpolicy.Error("redisstore", err, nothingTaken, fellBack)
}

// scriptCost returns n in quanta, or units.never for a cost no bucket of l
// can ever pay: the script denies it and reports the wait for a full
// bucket, which the Decision replaces by InfDuration.
func (l *Limiter) scriptCost(n float64) uint64 { return l.s.u.scriptCost(n) }

// scriptCost is Limiter.scriptCost for a limit of units u.
func (u units) scriptCost(n float64) uint64 {
	c, ok := fixedpoint.Quantize(n)
	if !ok || c > u.capacity {
		return u.never()
	}
	return c
}

// takes reports whether a script cost takes tokens when it is allowed: not
// a peek (0), nor a report without a take (above the capacity, see
// takeScript), which includes units.never.
func (u units) takes(cost uint64) bool { return cost != 0 && cost <= u.capacity }
