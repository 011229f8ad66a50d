package redisstore

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
	"github.com/faucetgo/faucet/internal/remote"
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
	// FallbackShare is the share of each Spec's rate and burst that a
	// local in-memory bucket per key decides calls with while Redis fails
	// (Config.OnFailure Fallback), in (0, 1]. 0 picks 1/N, N the instances
	// the heartbeats counted last (Store.Peers), or 1 before Redis first
	// answered one. The error of such a call wraps engine.ErrFallback, and
	// its decisions stand. Every Limiter of a Store falls back: a failure
	// never lifts the limit, and the caller may still choose to (httplimit:
	// a rule's fail_mode "open").
	FallbackShare float64
	// Heartbeat is how often the instance records itself in Redis, so that
	// every instance finds N for FallbackShare 0: 0 picks 1 s, negative
	// never (N stays 1). An instance counts as alive for five heartbeats
	// after its last, by Redis's clock.
	Heartbeat time.Duration
	// FallbackMaxKeys bounds each Limiter's fallback buckets
	// (Config.FallbackMaxKeys): 0 picks 1,000,000, negative is unbounded.
	FallbackMaxKeys int
	// Lease, if not nil, makes every limiter of the store a Leased one with
	// these options: checks decided locally from leases of the shared
	// buckets, which are apart from the per-check ones (every instance
	// sharing the buckets must lease, or none).
	Lease *LeaseOptions
	// SlotTTL is how long an in-flight slot (BindSlots) stays held without
	// a renewal: 0 picks engine.DefaultSlotTTL (30 s), else 1 s to 1 h. A
	// holder renews about every SlotTTL/3; an instance that dies frees its
	// slots SlotTTL after their last renewal.
	SlotTTL time.Duration
}

// slotTTL is SlotTTL, defaulted.
func (o *StoreOptions) slotTTL() time.Duration { return cmp.Or(o.SlotTTL, engine.DefaultSlotTTL) }

// Store is an engine.Store of Limiters (or Leased limiters) on one Redis
// client, and the heartbeat that counts the instances sharing it.
type Store struct {
	*engine.Pool
	bg *remote.Background
	// opts, defaulted, and c open the Slots of BindSlots.
	opts StoreOptions
	c    client
}

// Peers returns the instances sharing the store as the heartbeats last
// counted them: the N of FallbackShare 0.
func (s *Store) Peers() *Peers { return s.bg.Peers() }

// Close stops the heartbeat and closes every bound Limiter. It does not
// close the client.
func (s *Store) Close() error {
	s.bg.Stop()
	return s.Pool.Close()
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
// A Spec with a Calendar gets a Quota (see Quota), unless opts.Lease is
// set: a store with leases refuses quotas. Quotas are retuned in place
// (Quota.SetQuota, engine.QuotaRetuner), keeping what each key used.
// Likewise a Spec with a Window gets a Window (see Window), which a store
// with leases refuses; Binds of its ID with the same span and slots share
// it, retuned in place (Window.SetLimitTokens, engine.WindowRetuner).
//
// The Limiters are not engine.Retuners: a Spec whose rate or burst changed
// gets a Limiter of its own whose buckets start full (engine.Store). The
// instances that share buckets reload at different moments: for a while some
// enforce the old limit and some the new one, and no one instant exists at
// which a shared bucket's tokens could change over. So buckets of different
// limits are kept apart, as every Limiter's are (see KeyFor), rather than
// read under two limits. They report no bucket counts either: counting a
// limit's keys in Redis would mean scanning the keyspace.
func NewStore(client rueidis.Client, opts StoreOptions) (*Store, error) {
	if client == nil {
		return nil, invalid("client must not be nil")
	}
	return newStore(rueClient{client}, opts)
}

// NewStoreGoRedis is NewStore on a go-redis v9 client, with the same warning
// as NewGoRedis about go-redis's auto-pipelining.
func NewStoreGoRedis(client redis.UniversalClient, opts StoreOptions) (*Store, error) {
	if client == nil {
		return nil, invalid("client must not be nil")
	}
	return newStore(goRedisClient{client}, opts)
}

func newStore(c client, opts StoreOptions) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultStorePrefix
	}
	// Checked once, here, rather than on the first Bind: with a limit that
	// every option combines with.
	if err := opts.config(remote.ProbeSpec, &failpolicy.Peers{}).Check(); err != nil {
		return nil, err
	}
	if opts.Lease != nil {
		if err := opts.Lease.Check(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if t := opts.SlotTTL; t != 0 && (t < engine.MinSlotTTL || t > engine.MaxSlotTTL) {
		return nil, invalid("SlotTTL must be 0 (default %v) or from %v to %v, got %v", engine.DefaultSlotTTL, engine.MinSlotTTL, engine.MaxSlotTTL, t)
	}
	st := &Store{bg: remote.NewBackground(), opts: opts, c: c}
	st.Pool = engine.NewPool(func(s engine.Spec) (engine.Limiter, error) {
		if s.Window > 0 {
			return opts.window(c, s, st.bg.Peers())
		}
		if s.Calendar != nil {
			return opts.quota(c, s, st.bg.Peers())
		}
		l, err := newLimiter(c, opts.config(s, st.bg.Peers()))
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
	})
	st.bg.Heartbeat(opts.Heartbeat, cmp.Or(opts.Timeout, DefaultTimeout), func(every time.Duration) failpolicy.Beat {
		return heartbeat(c, opts.Prefix, every)
	})
	return st, nil
}

// quota returns the Quota of s, a Spec with a Calendar: keys under
// Prefix, then the ID, then ":quota"; its fallback is a local quota at
// FallbackShare of s's, or at 1/N with peers. Leases do not apply to
// quotas: a store with leases refuses them.
func (o *StoreOptions) quota(c client, s engine.Spec, peers *Peers) (engine.Limiter, error) {
	if o.Lease != nil {
		return nil, invalid("%q is a calendar quota, which a store with leases (StoreOptions.Lease) does not keep", s.Name)
	}
	q, err := remote.NewQuota(s.Burst, *s.Calendar, ErrInvalidConfig)
	if err != nil {
		return nil, err
	}
	// A token bucket's checks, of a limit every option combines with, for
	// the options; the quota replaces its units, key base and core.
	cfg := Config{Limit: 1, Burst: 1, Prefix: o.Prefix + escapeKey(s.ID) + ":", Timeout: o.Timeout,
		BreakAfter: o.BreakAfter, BreakFor: o.BreakFor, OnFailure: FailClosed, MaxBatch: 1}
	l, err := newLimiter(c, cfg)
	if err != nil {
		return nil, err
	}
	common := l.s.common
	common.OnFailure, common.FallbackShare, common.FallbackMaxKeys = Fallback, o.FallbackShare, o.FallbackMaxKeys
	if o.FallbackShare == 0 {
		common.FallbackPeers = peers
	}
	if l.core, err = remote.NewQuotaCore(common, q, ErrBreakerOpen); err != nil {
		return nil, err
	}
	l.s.keyBase = l.s.Prefix + "quota"
	l.escape, l.quota = true, q
	return &Quota{l: l}, nil
}

// window returns the Window of s, a Spec with a Window: keys under
// Prefix, then the ID, then ":window:", the span and the slots (windows of
// another span or slots never read each other's counts); its fallback is
// a local window at FallbackShare of s's limit, or at 1/N with peers.
// Leases do not apply to windows: a store with leases refuses them.
func (o *StoreOptions) window(c client, s engine.Spec, peers *Peers) (engine.Limiter, error) {
	if o.Lease != nil {
		return nil, invalid("%q is a strict window, which a store with leases (StoreOptions.Lease) does not keep", s.Name)
	}
	w, err := remote.NewWindow(s.Burst, s.Window, s.Slots, ErrInvalidConfig)
	if err != nil {
		return nil, err
	}
	if ns := w.SlotNanos(); ns%1000 != 0 && ns >= 1<<52 {
		// The script divides by the slot's length in nanoseconds only
		// below 2^52 (about 52 days); longer slots must be whole
		// microseconds.
		return nil, invalid("%q: a window's slot (Window/Slots) of 52 days or more must be a whole number of microseconds, got %v", s.Name, time.Duration(ns))
	}
	cfg := Config{Limit: 1, Burst: 1, Prefix: o.Prefix + escapeKey(s.ID) + ":", Timeout: o.Timeout,
		BreakAfter: o.BreakAfter, BreakFor: o.BreakFor, OnFailure: FailClosed, MaxBatch: 1}
	l, err := newLimiter(c, cfg)
	if err != nil {
		return nil, err
	}
	common := l.s.common
	common.OnFailure, common.FallbackShare, common.FallbackMaxKeys = Fallback, o.FallbackShare, o.FallbackMaxKeys
	if o.FallbackShare == 0 {
		common.FallbackPeers = peers
	}
	if l.core, err = remote.NewWindowCore(common, w, ErrBreakerOpen); err != nil {
		return nil, err
	}
	l.s.keyBase = fmt.Sprintf("%swindow:%v:%d", l.s.Prefix, w.Span(), w.Slots())
	l.escape, l.window = true, w
	return &Window{l: l}, nil
}

// config is the Config of s's Limiter, whose fallback follows peers unless
// FallbackShare fixes its share.
func (o *StoreOptions) config(s engine.Spec, peers *failpolicy.Peers) Config {
	cfg := Config{
		Limit:      s.Limit,
		Burst:      s.Burst,
		Prefix:     o.Prefix + escapeKey(s.ID) + ":",
		Timeout:    o.Timeout,
		BreakAfter: o.BreakAfter,
		BreakFor:   o.BreakFor,
	}
	cfg.OnFailure, cfg.FallbackShare, cfg.FallbackMaxKeys = Fallback, o.FallbackShare, o.FallbackMaxKeys
	if o.FallbackShare == 0 {
		cfg.FallbackPeers = peers
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
