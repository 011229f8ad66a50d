package redisstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// StoreOptions configures NewStore; the zero value is usable.
type StoreOptions struct {
	// Prefix starts every key of the store; "" picks DefaultStorePrefix. A
	// Spec's buckets are under Prefix, then its ID, then ":". Instances
	// share buckets when they use the same server, Prefix and Specs. It may
	// not contain '{' or '}'.
	Prefix string
	// Timeout, BreakAfter and BreakFor are every Limiter's (Config): a call
	// that fails or runs out of time returns an error, and the caller's
	// failure policy (httplimit: each rule's fail_mode) decides.
	Timeout    time.Duration
	BreakAfter int
	BreakFor   time.Duration
	// FallbackShare, if not 0, decides calls with a local in-memory bucket
	// per key at this share of each Spec's rate and burst, in (0, 1], while
	// Redis fails (Config.OnFailure Fallback): typically 1/instances. The
	// error of such a call wraps engine.ErrFallback, and its decisions
	// stand.
	FallbackShare float64
	// FallbackMaxKeys bounds each Limiter's fallback buckets
	// (Config.FallbackMaxKeys): 0 picks 1,000,000, negative is unbounded.
	FallbackMaxKeys int
	// Lease, if not nil, makes every limiter of the store a Leased one with
	// these options: checks decided locally from leases of the shared
	// buckets, which are apart from the per-check ones (every instance
	// sharing the buckets must lease, or none).
	Lease *LeaseOptions
}

// DefaultStorePrefix is the Prefix of a Store whose StoreOptions leave it
// empty.
const DefaultStorePrefix = "faucet:http:"

// NewStore returns an engine.Store whose Limiters keep their buckets in
// Redis through client (standalone, sentinel or cluster), so that several
// processes (faucet serve instances, or servers embedding httplimit) that
// share a server enforce one limit together. The store does not own the
// client: close it after the store's last use.
//
// Keys come from requests (header values, addresses, ...), so the store's
// Limiters escape '{', '}' and '%' in them: a client can neither pick a hash
// tag nor write a key that collides with another client's bucket. Limiters
// of one client decide a TakeAll together, with its atomicity and its bound
// when the keys fall in different hash slots (see Limiter.TakeAll).
//
// The Limiters are not engine.Retuners: a Spec whose rate or burst changed
// gets a Limiter of its own whose buckets start full (engine.Store). The
// instances that share buckets reload at different moments: for a while some
// enforce the old limit and some the new one, and no one instant exists at
// which a shared bucket's tokens could change over. So buckets of different
// limits are kept apart, as every Limiter's are (see KeyFor), rather than
// read under two limits. They report no bucket counts either: counting a
// limit's keys in Redis would mean scanning the keyspace.
func NewStore(client rueidis.Client, opts StoreOptions) (*engine.Pool, error) {
	if client == nil {
		return nil, invalid("client must not be nil")
	}
	return newStore(rueClient{client}, opts)
}

// NewStoreGoRedis is NewStore on a go-redis v9 client, with the same warning
// as NewGoRedis about go-redis's auto-pipelining.
func NewStoreGoRedis(client redis.UniversalClient, opts StoreOptions) (*engine.Pool, error) {
	if client == nil {
		return nil, invalid("client must not be nil")
	}
	return newStore(goRedisClient{client}, opts)
}

func newStore(c client, opts StoreOptions) (*engine.Pool, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultStorePrefix
	}
	// Checked once, here, rather than on the first Bind: with a limit that
	// every option combines with.
	if err := opts.config(engine.Spec{ID: "probe", Limit: 1e9, Burst: 1e9}).Check(); err != nil {
		return nil, err
	}
	if opts.Lease != nil {
		if err := opts.Lease.Check(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	return engine.NewPool(func(s engine.Spec) (engine.Limiter, error) {
		l, err := newLimiter(c, opts.config(s))
		if err != nil {
			return nil, err
		}
		l.escape = true
		if opts.Lease == nil {
			return l, nil
		}
		lo := *opts.Lease
		lo.CloseStore = true
		ls, err := NewLeased(l, lo)
		if err != nil {
			l.Close()
			return nil, err
		}
		return ls, nil
	}), nil
}

// config is the Config of s's Limiter.
func (o *StoreOptions) config(s engine.Spec) Config {
	cfg := Config{
		Limit:      s.Limit,
		Burst:      s.Burst,
		Prefix:     o.Prefix + escapeKey(s.ID) + ":",
		Timeout:    o.Timeout,
		BreakAfter: o.BreakAfter,
		BreakFor:   o.BreakFor,
	}
	if o.FallbackShare != 0 {
		cfg.OnFailure, cfg.FallbackShare, cfg.FallbackMaxKeys = Fallback, o.FallbackShare, o.FallbackMaxKeys
	}
	return cfg
}

// escapeKey percent-encodes '%', '{' and '}', so that the result never
// holds a hash tag and distinct keys stay distinct. Keys without them, the
// common case, are returned as they are, without allocating.
func escapeKey(k string) string {
	if !strings.ContainsAny(k, "%{}") {
		return k
	}
	var b strings.Builder
	b.Grow(len(k) + 8)
	for i := 0; i < len(k); i++ {
		switch c := k[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
