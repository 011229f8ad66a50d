package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// HTTPStoreOptions configures an HTTPStore; the zero value is usable.
type HTTPStoreOptions struct {
	// Prefix starts every key of the store; "" picks "faucet:http:". A
	// rule's buckets are under Prefix, then its httplimit.Limit.ID, then
	// ":". Instances share buckets when they use the same server, Prefix
	// and rules. It may not contain '{' or '}'.
	Prefix string
	// Timeout bounds each call to Redis (Config.Timeout); 0 picks 100 ms.
	// A call that fails or runs out of time makes TakeAll return an error,
	// and each rule's fail_mode decides the request.
	Timeout time.Duration
	// BreakAfter and BreakFor are Config's: after BreakAfter consecutive
	// failures of a rule's calls, its calls fail at once for BreakFor,
	// without waiting for Redis.
	BreakAfter int
	BreakFor   time.Duration
	// FallbackShare, if not 0, decides requests with a local in-memory
	// bucket per key at this share of each rule's rate and burst, in (0, 1],
	// while Redis fails (Config.OnFailure Fallback): typically 1/instances.
	// TakeAll then returns the local decision and no error, so the rules'
	// fail_mode no longer applies.
	FallbackShare float64
	// FallbackMaxKeys bounds each rule's fallback buckets
	// (Config.FallbackMaxKeys): 0 picks 1,000,000, negative is unbounded.
	FallbackMaxKeys int
	// OnFallback, if not nil, is called with the error of every call the
	// fallback answered: errors that httplimit.Options.OnStoreError, which
	// hears of the others, never sees.
	OnFallback func(error)
}

const defaultHTTPPrefix = "faucet:http:"

// HTTPStore is an httplimit.Store that keeps every rule's buckets in Redis,
// so that several processes (faucet serve instances, or servers embedding
// httplimit) that share a server enforce one limit together. Each bound rule
// is a Limiter; a request's takes are one AllowAll, with its atomicity and
// its bound when the keys fall in different hash slots (see AllowAll).
//
// Keys come from requests (header values, addresses, ...), so the store
// escapes '{', '}' and '%' in them: a client cannot pick a hash tag, nor
// write a key that collides with another client's bucket.
//
// HTTPStore does not implement httplimit.BucketStatser: counting a rule's
// keys in Redis would mean scanning the keyspace.
//
// Nor httplimit.Retuner, so a rule whose rate or burst changed starts with
// full buckets. The instances that share them reload at different moments:
// for a while some enforce the old limit and some the new one, and no one
// instant exists at which a shared bucket's tokens could change over. So
// buckets of different limits are kept apart, as every Limiter's are (see
// KeyFor), rather than read under two limits.
type HTTPStore struct {
	opts   HTTPStoreOptions
	client client
	mu     sync.Mutex
	byID   map[string]*httpLimit // bound rules by Limit.ID; guarded by mu
}

// httpLimit is an HTTPStore's Handle.
type httpLimit struct {
	l    *Limiter
	id   string
	refs int // guarded by HTTPStore.mu
}

var _ httplimit.Store = (*HTTPStore)(nil)

// NewHTTPStore returns an HTTPStore on a rueidis client (standalone,
// sentinel or cluster). The store does not own the client: close it after
// the store's last use.
func NewHTTPStore(client rueidis.Client, opts HTTPStoreOptions) (*HTTPStore, error) {
	if client == nil {
		return nil, invalid("client must not be nil")
	}
	return newHTTPStore(rueClient{client}, opts)
}

// NewHTTPStoreGoRedis is NewHTTPStore on a go-redis v9 client, with the same
// warning as NewGoRedis about go-redis's auto-pipelining.
func NewHTTPStoreGoRedis(client redis.UniversalClient, opts HTTPStoreOptions) (*HTTPStore, error) {
	if client == nil {
		return nil, invalid("client must not be nil")
	}
	return newHTTPStore(goRedisClient{client}, opts)
}

func newHTTPStore(c client, opts HTTPStoreOptions) (*HTTPStore, error) {
	if opts.Prefix == "" {
		opts.Prefix = defaultHTTPPrefix
	}
	s := &HTTPStore{opts: opts, client: c, byID: map[string]*httpLimit{}}
	// Check the options once, here, rather than on the first Bind: a
	// probe limit that every option combines with.
	l, err := s.newLimiter(httplimit.Limit{ID: "probe", Name: "probe", Rate: 1e9, Burst: 1e9})
	if err != nil {
		return nil, err
	}
	l.Close()
	return s, nil
}

func (s *HTTPStore) newLimiter(lim httplimit.Limit) (*Limiter, error) {
	cfg := Config{
		Limit:      engine.Limit(lim.Rate),
		Burst:      lim.Burst,
		Prefix:     s.opts.Prefix + escapeKey(lim.ID) + ":",
		Timeout:    s.opts.Timeout,
		BreakAfter: s.opts.BreakAfter,
		BreakFor:   s.opts.BreakFor,
	}
	if s.opts.FallbackShare != 0 {
		cfg.OnFailure, cfg.FallbackShare, cfg.FallbackMaxKeys = Fallback, s.opts.FallbackShare, s.opts.FallbackMaxKeys
	}
	return newLimiter(s.client, cfg)
}

// Bind returns the Limiter of l.ID, creating it on first use. Buckets are
// keyed by the ID, so a rule whose ID is unchanged keeps its buckets across
// reloads and restarts, and one with a new ID (a change of its name,
// limit_keys, rate or burst) starts with full ones.
func (s *HTTPStore) Bind(l httplimit.Limit) (httplimit.Handle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.byID[l.ID]; h != nil {
		h.refs++
		return h, nil
	}
	rl, err := s.newLimiter(l)
	if err != nil {
		return nil, fmt.Errorf("redisstore: rule %q: %w", l.Name, err)
	}
	h := &httpLimit{l: rl, id: l.ID, refs: 1}
	s.byID[l.ID] = h
	return h, nil
}

// Release forgets the Limiter once every Bind of its ID is released. Its
// buckets stay in Redis until their TTL (a full refill) expires them, and
// takes in flight keep working.
func (s *HTTPStore) Release(h httplimit.Handle) {
	hl := h.(*httpLimit)
	s.mu.Lock()
	defer s.mu.Unlock()
	if hl.refs--; hl.refs == 0 {
		delete(s.byID, hl.id)
		hl.l.Close()
	}
}

// maxStackTakes is how many takes TakeAll converts without allocating.
const maxStackTakes = 8

// TakeAll takes from every bucket or from none, as Limiter.AllowAll does,
// at the Redis server's time: now is ignored. An error means Redis could
// not decide (unless FallbackShare is set, see HTTPStoreOptions); then
// nothing was taken, except what a failed give-back left spent (see
// AllowAll).
func (s *HTTPStore) TakeAll(ctx context.Context, _ time.Time, takes []httplimit.Take, out []engine.Decision) (int, error) {
	if len(takes) == 0 {
		return -1, nil
	}
	var stack [maxStackTakes]Take
	rts := stack[:0]
	if len(takes) > maxStackTakes {
		rts = make([]Take, 0, len(takes))
	}
	for _, t := range takes {
		rts = append(rts, Take{Limiter: t.Handle.(*httpLimit).l, Key: escapeKey(t.Key), N: t.N})
	}
	denied, err := rts[0].Limiter.AllowAll(ctx, rts, out)
	if err != nil {
		if s.opts.FallbackShare == 0 || errors.Is(err, ErrShortOut) {
			return -1, err
		}
		if s.opts.OnFallback != nil {
			s.opts.OnFallback(err)
		}
	}
	return denied, nil
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
