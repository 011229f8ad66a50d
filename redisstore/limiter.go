package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/fixedpoint"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Limiter is a token-bucket rate limiter whose buckets live in Redis, shared
// by every process that uses the same server (or cluster), Prefix and
// Config. It is safe for simultaneous use.
type Limiter struct {
	s      *settings
	c      client
	stats  counters
	broken atomic.Int64 // unix nanos until which the breaker is open
	fails  atomic.Int64 // consecutive store failures
	// batches reports that concurrent AllowN calls share scripts (see
	// batch.go): MaxBatch above 1 on a client that is not a cluster's.
	batches bool
	batch   batcher
}

type counters struct {
	allowed, denied, storeErrors, failedOpen, failedClosed, fallback, skipped, scripts atomic.Uint64
}

// Stats is a snapshot of a Limiter's counters.
type Stats struct {
	// Allowed and Denied count the decisions Redis made.
	Allowed, Denied uint64
	// StoreErrors counts takes the store failed to decide (an AllowAll
	// counts each of its takes in its own Limiter): errors, timeouts, and
	// those the open breaker answered without asking Redis.
	StoreErrors uint64
	// FailedOpen, FailedClosed and Fallback count how the policy answered
	// those calls: allowed unchecked, denied, or decided by the local engine.
	FailedOpen, FailedClosed, Fallback uint64
	// Skipped counts scripts this Limiter did not send because its breaker
	// was open (one per AllowN; an AllowAll's are counted by the Limiter it
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
// call by up to the client's ReadTimeout (3 s by default).
func NewGoRedis(client redis.UniversalClient, cfg Config) (*Limiter, error) {
	if client == nil {
		return nil, nilClient(cfg)
	}
	return newLimiter(goRedisClient{client}, cfg)
}

// nilClient is the error for a nil client: the Config's own error first, as
// it names a field.
func nilClient(cfg Config) error {
	s, err := cfg.validate()
	if err != nil {
		return err
	}
	if s.fallback != nil {
		s.fallback.Close()
	}
	return invalid("client must not be nil")
}

func newLimiter(c client, cfg Config) (*Limiter, error) {
	s, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Limiter{s: s, c: c, batches: s.maxBatch > 1 && !c.sharded()}, nil
}

// Close releases the fallback engine, if any. It does not close the client.
func (l *Limiter) Close() error {
	if l.s.fallback != nil {
		return l.s.fallback.Close()
	}
	return nil
}

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
	key = engine.BoundedKey(key)
	if hasTag(key) {
		return l.s.keyBase + "=" + key
	}
	return l.s.keyBase + ":{" + key + "}"
}

// hasTag reports whether key contains a Redis Cluster hash tag.
func hasTag(key string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					return j > i+1
				}
			}
			return false
		}
	}
	return false
}

// Allow reports whether one token may be taken from key's bucket now, and
// takes it if so. On a store failure it returns the policy's answer.
func (l *Limiter) Allow(ctx context.Context, key string) bool {
	d, _ := l.AllowN(ctx, key, 1)
	return d.Allowed
}

// AllowN takes n tokens from key's bucket at the Redis server's time if it
// holds them, with exactly engine.Engine.AllowN's Decision: n may be
// fractional (0.001 resolution), 0 peeks, and n above Burst, negative or NaN
// is denied with RetryAfter engine.InfDuration without a write.
//
// A non-nil error means the store failed (or the breaker is open); the
// Decision is then the answer of Config.OnFailure.
//
// Calls made while the Limiter already waits for replies share scripts (see
// Config.MaxBatch).
func (l *Limiter) AllowN(ctx context.Context, key string, n float64) (engine.Decision, error) {
	var out [1]engine.Decision
	_, err := l.AllowAll(ctx, []Take{{Limiter: l, Key: key, N: n}}, out[:])
	return out[0], err
}

// Tokens returns the tokens key's bucket holds now (Burst for a key without
// a bucket). It writes nothing.
func (l *Limiter) Tokens(ctx context.Context, key string) (float64, error) {
	d, err := l.AllowN(ctx, key, 0)
	if err != nil {
		return 0, err
	}
	return d.Remaining, nil
}

// Stats returns the Limiter's counters.
func (l *Limiter) Stats() Stats {
	c := &l.stats
	return Stats{
		Allowed:      c.allowed.Load(),
		Denied:       c.denied.Load(),
		StoreErrors:  c.storeErrors.Load(),
		FailedOpen:   c.failedOpen.Load(),
		FailedClosed: c.failedClosed.Load(),
		Fallback:     c.fallback.Load(),
		Skipped:      c.skipped.Load(),
		Scripts:      c.scripts.Load(),
	}
}

// call runs a script under the Limiter's deadline and keeps the breaker.
func (l *Limiter) call(ctx context.Context, s script, keys, args []string) ([]int64, error) {
	if until := l.broken.Load(); until != 0 {
		if time.Now().UnixNano() < until {
			l.stats.skipped.Add(1)
			return nil, ErrBreakerOpen
		}
	}
	// A caller's own deadline that comes first already bounds the call.
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > l.s.Timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.s.Timeout)
		defer cancel()
	}
	l.stats.scripts.Add(1)
	v, err := l.c.run(ctx, s, keys, args)
	if err != nil {
		if l.fails.Add(1) >= int64(l.s.breakWhen) {
			l.broken.Store(time.Now().Add(l.s.breakFor).UnixNano())
		}
		return nil, err
	}
	if l.fails.Load() != 0 {
		l.fails.Store(0)
	}
	if l.broken.Load() != 0 {
		l.broken.Store(0)
	}
	return v, nil
}

// ErrBreakerOpen is the error of a call the breaker answered without asking
// Redis, after Config.BreakAfter consecutive failures.
var ErrBreakerOpen = fmt.Errorf("redisstore: breaker open after consecutive store failures")

// scriptCost returns n in quanta, or units.never for a cost no bucket of l
// can ever pay: the script denies it and reports the wait for a full
// bucket, which the Decision replaces by InfDuration.
func (l *Limiter) scriptCost(n float64) uint64 {
	c, ok := fixedpoint.Quantize(n)
	if !ok || c > l.s.u.capacity {
		return l.s.u.never()
	}
	return c
}
