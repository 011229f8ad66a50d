package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/puzpuzpuz/xsync/v3"
)

// Leased is a limiter whose instances share one bucket per key in a store
// and decide most checks locally: each takes tokens from the shared bucket
// in leases, and a check its lease covers costs no I/O and no allocation.
// Every token admitted was taken from the shared bucket first, and the
// bucket refills only up to the burst less what leases hold, so the bound of
// one bucket holds for all instances together: in any span, tokens admitted
// by every instance are at most Burst + Limit × span. Leases are sized from
// the key's local demand, at most MaxShare of the burst.
//
// When the shared bucket cannot grant a check's cost, the instance denies
// locally, without asking the store, until the wait the bucket's state gives
// (RetryAfter; never early).
//
// Decisions differ from a per-check Limiter's in what they can know:
// Remaining is the tokens left in this instance's lease, and ResetAfter is
// 0. It is safe for concurrent use. Close releases the leases' unspent
// tokens.
type Leased struct {
	st       Store
	capacity uint64 // the burst in quanta
	lifetime time.Duration
	margin   time.Duration
	share    uint64 // the most quanta of one lease
	batch    uint64 // the quanta 5 ms refill: the most a fetch waits for
	maxKeys  int
	keys     *xsync.MapOf[string, *leasedKey]
	base     time.Time // the monotonic clock's origin
	inst     string    // prefix of lease ids, unique to this Leased
	seq      atomic.Uint64
	stop     chan struct{}
	done     sync.WaitGroup
	closed   atomic.Bool
	owns     bool
	stats    counters
}

// leasedKey is a key's local state.
type leasedKey struct {
	// cur is the lease checks spend from; a fetch replaces it whole.
	cur atomic.Pointer[held]
	// next is a lease fetched ahead of need, when cur ran low: checks
	// move to it when cur cannot cover them, without waiting for the store.
	next atomic.Pointer[held]
	// prefetching is set while a fetch of next is on its way.
	prefetching atomic.Bool
	// retired is a lease checks moved on from, to end with the next grant
	// (as its previous lease) rather than with a call of its own.
	retired atomic.Pointer[held]
	// deniedUntil is the local time (ns since base) until which the shared
	// bucket cannot grant the last cost that asked: checks are denied
	// locally until then.
	deniedUntil atomic.Int64
	// deniedHave is the quanta the bucket held at that denial: a smaller
	// cost may still pass, and asks the store.
	deniedHave atomic.Uint64
	// used is the local time of the last check, for idle release.
	used atomic.Int64
	// spent counts the quanta spent since the last fetch: the demand.
	spent atomic.Uint64
	// mu serialises fetches; lastFetch, rtt and lastSize are guarded by
	// it.
	mu        sync.Mutex
	lastFetch int64
	rtt       int64
	// lastSize is the quanta of the last lease granted.
	lastSize uint64
}

// held is one lease in the instance: quanta left to spend until deadline
// (local ns).
type held struct {
	// quanta is decremented by a CompareAndSwap per check and swapped to
	// 0 when the lease is released.
	quanta   atomic.Int64
	deadline int64
	id       string
	// size is the quanta granted: below half of it, the next lease is
	// fetched ahead.
	size int64
}

// New returns a Leased limiter on st's shared buckets, which are apart from
// its per-check ones: a key leased by some instances and checked per call
// by others would be limited twice over, not once.
func New(st Store, opts Options) (*Leased, error) {
	if st == nil {
		return nil, errNilStore
	}
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	capacity, _ := fixedpoint.QuantizeExact(st.Burst())
	var id [8]byte
	rand.Read(id[:])
	s := &Leased{
		st:       st,
		capacity: capacity,
		lifetime: opts.Lifetime,
		// The instance's clock starts before the store's grant, so a
		// lease's local deadline comes first already; the margin covers a
		// check that read the clock just before it and spends just after.
		margin:  time.Millisecond + opts.Lifetime/1000,
		share:   max(1, uint64(math.Floor(float64(capacity)*opts.MaxShare))),
		batch:   uint64(float64(st.Limit()) * fixedpoint.QuantaPerToken / 200),
		maxKeys: opts.MaxKeys,
		keys:    xsync.NewMapOf[string, *leasedKey](),
		base:    time.Now(),
		inst:    hex.EncodeToString(id[:]),
		stop:    make(chan struct{}),
		owns:    opts.CloseStore,
	}
	s.done.Add(1)
	go s.sweep()
	return s, nil
}

var _ engine.Limiter = (*Leased)(nil)

// Store is the store the limiter leases from.
func (s *Leased) Store() Store { return s.st }

// Limit is the shared bucket's refill rate.
func (s *Leased) Limit() engine.Limit { return s.st.Limit() }

// Burst is the shared bucket's capacity.
func (s *Leased) Burst() float64 { return s.st.Burst() }

// Share is the most tokens one lease holds: MaxShare of the burst.
func (s *Leased) Share() float64 { return fixedpoint.TokensOf(s.share) }

func (s *Leased) now() int64 { return int64(time.Since(s.base)) }

// Take takes n tokens for key: from this instance's lease when it holds
// them, else from a new lease (one call to the store). n 0 reports the
// tokens this instance's lease of key holds.
func (s *Leased) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	if s == nil {
		return engine.Decision{}, engine.ErrNilLimiter
	}
	var out [1]engine.Decision
	_, err := s.TakeAll(ctx, []engine.Take{{Limiter: s, Key: key, N: n}}, out[:])
	return out[0], err
}

// TakeAll takes from every take's key or from none. The takes are spent
// from their leases in order; a denial gives the earlier ones back to the
// leases they came from. Every take's Limiter must be a *Leased (of any
// store): otherwise the error wraps engine.ErrForeignTake.
func (s *Leased) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	if s == nil {
		return -1, engine.ErrNilLimiter
	}
	if len(out) < len(takes) {
		return -1, fmt.Errorf("lease: %w: %d takes, %d decisions", engine.ErrShortOut, len(takes), len(out))
	}
	for i := range takes {
		switch tl, ok := takes[i].Limiter.(*Leased); {
		case takes[i].Limiter == nil || ok && tl == nil:
			return -1, fmt.Errorf("lease: %w: takes[%d]", engine.ErrNilLimiter, i)
		case !ok:
			return -1, fmt.Errorf("lease: %w: takes[%d] is a %T, not a Leased limiter", engine.ErrForeignTake, i, takes[i].Limiter)
		}
	}
	for i := range takes {
		if c, ok := fixedpoint.Quantize(takes[i].N); !ok || c > leasedOf(&takes[i]).capacity {
			for j := range takes {
				out[j] = leasedOf(&takes[j]).peek(takes[j].Key)
				out[j].Allowed = false
			}
			out[i].RetryAfter = engine.InfDuration
			return i, nil
		}
	}
	var stack [8]spend
	spends := stack[:0]
	for i := range takes {
		tl := leasedOf(&takes[i])
		cost, _ := fixedpoint.Quantize(takes[i].N)
		d, sp, err := tl.take(ctx, takes[i].Key, cost)
		if err != nil {
			giveBack(spends)
			// A lease that may have been granted unseen is lost to every
			// instance until it ends: under-admission, never more.
			fd, err := tl.st.FailLease(takes[i].Key, takes[i].N, err)
			out[i] = fd
			for j := range takes {
				if j != i {
					out[j] = leasedOf(&takes[j]).peek(takes[j].Key)
				}
				if !fd.Allowed {
					out[j].Allowed = false
				}
			}
			if !fd.Allowed {
				return i, err
			}
			return -1, err
		}
		out[i] = d
		if !d.Allowed {
			giveBack(spends)
			for j := range takes {
				if j != i {
					out[j] = leasedOf(&takes[j]).peek(takes[j].Key)
					out[j].Allowed = false
				}
			}
			return i, nil
		}
		spends = append(spends, sp)
	}
	return -1, nil
}

// spend is what one allowed take of a TakeAll took from which lease.
type spend struct {
	from  *held
	e     *leasedKey
	quant int64
}

// leasedOf is the Leased limiter of a take TakeAll accepted.
func leasedOf(tk *engine.Take) *Leased {
	tl, _ := tk.Limiter.(*Leased)
	return tl
}

// giveBack returns spends to their leases (lost if a lease has ended).
func giveBack(spends []spend) {
	for i := len(spends) - 1; i >= 0; i-- {
		sp := spends[i]
		if sp.from != nil {
			sp.from.quanta.Add(sp.quant)
			sp.e.spent.Add(^uint64(sp.quant - 1))
		}
	}
}

// entry returns key's state, creating it; nil when MaxKeys keys hold state.
func (s *Leased) entry(key string) *leasedKey {
	if e, ok := s.keys.Load(key); ok {
		return e
	}
	if s.keys.Size() >= s.maxKeys {
		return nil
	}
	e, _ := s.keys.LoadOrCompute(key, func() *leasedKey { return &leasedKey{} })
	return e
}

// peek reports key's local state: the tokens its lease holds.
func (s *Leased) peek(key string) engine.Decision {
	d := engine.Decision{Allowed: true}
	if e, ok := s.keys.Load(key); ok {
		if ls := e.cur.Load(); ls != nil && s.now() < ls.deadline {
			d.Remaining = float64(ls.quanta.Load()) / fixedpoint.QuantaPerToken
		}
	}
	return d
}

// take decides cost quanta (0 peeks) for key.
func (s *Leased) take(ctx context.Context, key string, cost uint64) (engine.Decision, spend, error) {
	if cost == 0 {
		return s.peek(key), spend{}, nil
	}
	e := s.entry(key)
	if e == nil {
		d, err := s.once(ctx, key, cost)
		return d, spend{}, err
	}
	now := s.now()
	e.used.Store(now)
	if d, sp, ok := s.decided(e, key, cost, now); ok {
		return d, sp, nil
	}
	return s.fetch(ctx, e, key, cost)
}

// decided is the decision of key without the store, if there is one: a
// spend from its lease, or a denial while its bucket is known short.
func (s *Leased) decided(e *leasedKey, key string, cost uint64, now int64) (engine.Decision, spend, bool) {
	if d, sp, ok := s.local(key, e, cost, now); ok {
		return d, sp, true
	}
	if until := e.deniedUntil.Load(); now < until && cost > e.deniedHave.Load() {
		d := s.peek(key)
		d.Allowed, d.RetryAfter = false, time.Duration(until-now)
		return d, spend{}, true
	}
	return engine.Decision{}, spend{}, false
}

// local spends cost from e's lease if it is live and holds it, moving to
// the lease fetched ahead when the current one cannot; below half a lease
// left, it fetches the next one ahead.
//
// Lock-free: load the lease, check its deadline, CompareAndSwap its
// quanta; a lost race reloads (the lease may have been replaced or
// released, and swapped to 0).
func (s *Leased) local(key string, e *leasedKey, cost uint64, now int64) (engine.Decision, spend, bool) {
	for {
		ls := e.cur.Load()
		if ls != nil && now < ls.deadline {
			q := ls.quanta.Load()
			if q >= int64(cost) {
				if !ls.quanta.CompareAndSwap(q, q-int64(cost)) {
					continue
				}
				e.spent.Add(cost)
				left := q - int64(cost)
				if left < ls.size/2 {
					s.prefetchLater(key, e, now)
				}
				return engine.Decision{Allowed: true, Remaining: float64(left) / fixedpoint.QuantaPerToken},
					spend{from: ls, e: e, quant: int64(cost)}, true
			}
		}
		if !s.promote(key, e, ls, now) {
			return engine.Decision{}, spend{}, false
		}
	}
}

// promote makes the lease fetched ahead e's current one in place of ls,
// ending ls; it reports false when there is none to move to. A lease
// fetched ahead that ended unused is dropped (its quanta are forfeited,
// never admitted).
//
// Lock-free: take next out by CompareAndSwap, then swap it in for ls; if
// cur changed meanwhile, put it back as next, or end it if another came.
func (s *Leased) promote(key string, e *leasedKey, ls *held, now int64) bool {
	nx := e.next.Load()
	if nx == nil {
		return false
	}
	if now >= nx.deadline {
		if e.next.CompareAndSwap(nx, nil) {
			s.stats.expired.Add(1)
		}
		return false
	}
	if !e.next.CompareAndSwap(nx, nil) {
		return true
	}
	if e.cur.CompareAndSwap(ls, nx) {
		s.retire(key, e, ls)
		return true
	}
	if !e.next.CompareAndSwap(nil, nx) {
		s.endLater(key, nx)
	}
	return true
}

// retire keeps ls, which checks moved on from, for the next grant of key to
// end: the store then sees one call per lease, not two. Until then its
// quanta still count as leased, which lowers the bucket's refill ceiling,
// never raises it. A lease retired before it is ended now.
func (s *Leased) retire(key string, e *leasedKey, ls *held) {
	if ls == nil {
		return
	}
	if old := e.retired.Swap(ls); old != nil {
		s.endLater(key, old)
	}
}

// takeRetired takes key's retired lease for a grant to end: its id and the
// quanta left in it, or "" if there is none.
func takeRetired(e *leasedKey) (*held, string, uint64) {
	r := e.retired.Swap(nil)
	if r == nil {
		return nil, "", 0
	}
	return r, r.id, uint64(max(0, r.quanta.Swap(0)))
}

// unretire puts back a lease a failed grant did not end.
func (s *Leased) unretire(key string, e *leasedKey, r *held, unspent uint64) {
	if r == nil {
		return
	}
	r.quanta.Add(int64(unspent))
	s.retire(key, e, r)
}

// prefetchLater fetches key's next lease off the caller's path, unless one
// is in hand or on its way, or the bucket is known short.
func (s *Leased) prefetchLater(key string, e *leasedKey, now int64) {
	if e.next.Load() != nil || now < e.deniedUntil.Load() || s.closed.Load() || !e.prefetching.CompareAndSwap(false, true) {
		return
	}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		defer e.prefetching.Store(false)
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.next.Load() != nil {
			return
		}
		ctx, cancel := s.background()
		defer cancel()
		r, prev, unspent := takeRetired(e)
		ls, err := s.grant(ctx, e, key, 1, prev, unspent, sizeAhead)
		if err != nil {
			s.unretire(key, e, r, unspent)
		}
		if ls != nil && (s.closed.Load() || !e.next.CompareAndSwap(nil, ls)) {
			s.endLater(key, ls)
		}
	}()
}

// background is the context of a call off the callers' path: bounded by a
// lifetime, past which a lease it asks for or gives back has ended anyway.
// (Each store also bounds its calls by its own timeout.)
func (s *Leased) background() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.lifetime)
}

// fetch takes a new lease for key that covers cost, or finds the shared
// bucket short of it and denies until it can be.
func (s *Leased) fetch(ctx context.Context, e *leasedKey, key string, cost uint64) (engine.Decision, spend, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := s.now()
	// Another check may have fetched while this one waited.
	if d, sp, ok := s.decided(e, key, cost, now); ok {
		return d, sp, nil
	}
	// The lease in hand ends in the same call, its unspent quanta back in
	// the bucket: a spent lease would otherwise hold down the bucket's
	// refill until it expired. Checks that race this find it empty and
	// wait for the new one.
	prev, unspent := "", int64(0)
	old := e.cur.Load()
	if old != nil {
		prev, unspent = old.id, max(0, old.quanta.Swap(0))
	}
	// One previous lease per grant: a retired one ends on its own.
	if r := e.retired.Swap(nil); r != nil {
		s.endLater(key, r)
	}
	s.stats.waited.Add(1)
	// A live lease that ran out was too small for the demand, which the
	// wait itself hid: checks that wait for every lease measure the rate
	// of the round trips, not their own. The next one is twice as large.
	how := sizeDemand
	if old != nil && now < old.deadline {
		how = sizeGrow
	}
	ls, err := s.grant(ctx, e, key, cost, prev, uint64(unspent), how)
	if err != nil {
		if old != nil {
			old.quanta.Add(unspent)
		}
		return engine.Decision{}, spend{}, err
	}
	if old != nil {
		e.cur.CompareAndSwap(old, nil)
	}
	if ls == nil {
		d := s.peek(key)
		d.Allowed, d.RetryAfter = false, time.Duration(e.deniedUntil.Load()-s.now())
		return d, spend{}, nil
	}
	ls.quanta.Add(-int64(cost))
	e.spent.Add(cost)
	e.cur.Store(ls)
	left := ls.quanta.Load()
	return engine.Decision{Allowed: true, Remaining: float64(left) / fixedpoint.QuantaPerToken},
		spend{from: ls, e: e, quant: int64(cost)}, nil
}

// sizing says how a grant sizes its lease beyond the key's demand.
type sizing int

const (
	// sizeDemand: the demand alone (a first lease, or one after a pause).
	sizeDemand sizing = iota
	// sizeGrow: at least twice the last lease, which ran out while live.
	// The demand, measured across the waits for leases, reads as the
	// rate of round trips rather than of checks.
	sizeGrow
	// sizeAhead: fetched ahead, at least as large as the last, whose
	// size the demand it served justified. A key whose demand falls goes
	// idle, and its next lease is sized afresh.
	sizeAhead
)

// grant asks the shared bucket for a lease of key sized from its demand
// (and how), covering at least cost, ending the caller's lease prev (with
// unspent quanta) in the same call. It returns the lease, or nil when the
// bucket cannot grant: then the key is denied locally until it can. e.mu
// is held.
func (s *Leased) grant(ctx context.Context, e *leasedKey, key string, cost uint64, prev string, unspent uint64, how sizing) (*held, error) {
	now := s.now()
	want := s.size(e, cost, now)
	switch how {
	case sizeGrow:
		want = min(max(want, 2*e.lastSize), max(cost, s.share))
	case sizeAhead:
		want = min(max(want, e.lastSize), max(cost, s.share))
	}
	// A bucket that holds less than half the lease the demand wants, or
	// than 5 ms of refill if that is less, is left to refill: checks are
	// denied locally until it has that much, so that a key over its limit
	// costs the store a call per half lease or 5 ms, not one per token
	// refilled. Nothing is lost meanwhile: the tokens wait in the bucket,
	// which is not full. A slow limit (less than cost in 5 ms) batches
	// nothing.
	least := max(cost, min(want/2, s.batch))
	id := s.inst + "-" + strconv.FormatUint(s.seq.Add(1), 36)
	s.stats.grants.Add(1)
	g, err := s.st.GrantLease(ctx, key, Request{Want: want, Least: least, TTL: s.lifetime, ID: id, Prev: prev, Unspent: unspent})
	got := s.now()
	if err != nil {
		return nil, err
	}
	// The demand from here on is what the next lease is sized from.
	e.rtt, e.lastFetch = got-now, got
	e.spent.Store(0)
	if g.Quanta == 0 {
		e.deniedHave.Store(g.Tokens)
		e.deniedUntil.Store(got + int64(g.Wait))
		return nil, nil
	}
	e.lastSize = g.Quanta
	ls := &held{deadline: now + int64(s.lifetime-s.margin), id: id, size: int64(g.Quanta)}
	ls.quanta.Store(int64(g.Quanta))
	return ls, nil
}

// size is the quanta to ask a lease for: the key's demand over a few round
// trips (at least 20 ms), at least cost, at most MaxShare of the burst.
func (s *Leased) size(e *leasedKey, cost uint64, now int64) uint64 {
	want := cost
	if el := now - e.lastFetch; e.lastFetch > 0 && el > 0 {
		horizon := max(4*e.rtt, int64(20*time.Millisecond))
		rate := float64(e.spent.Load()) / float64(el) // quanta per ns
		want = max(want, uint64(rate*float64(horizon)))
	}
	return max(cost, min(want, s.share))
}

// once decides a key that holds no state (MaxKeys reached): a lease of
// exactly cost, spent at once.
func (s *Leased) once(ctx context.Context, key string, cost uint64) (engine.Decision, error) {
	id := s.inst + "-" + strconv.FormatUint(s.seq.Add(1), 36)
	s.stats.grants.Add(1)
	s.stats.waited.Add(1)
	g, err := s.st.GrantLease(ctx, key, Request{Want: cost, Least: cost, TTL: s.lifetime, ID: id})
	if err != nil {
		return engine.Decision{}, err
	}
	if g.Quanta == 0 {
		return engine.Decision{RetryAfter: g.Wait}, nil
	}
	return engine.Decision{Allowed: true}, nil
}

// releaseLater ends e's lease ls if it is still e's current one.
func (s *Leased) releaseLater(key string, e *leasedKey, ls *held) {
	if ls != nil && e.cur.CompareAndSwap(ls, nil) {
		s.endLater(key, ls)
	}
}

// endLater ends lease ls, if live, giving its unspent quanta back to the
// shared bucket off the caller's path: even a spent lease is worth ending,
// as its quanta hold down the bucket's refill until it expires.
func (s *Leased) endLater(key string, ls *held) {
	if ls == nil {
		return
	}
	q := max(0, ls.quanta.Swap(0))
	if s.now() >= ls.deadline {
		if q > 0 {
			s.stats.expired.Add(1)
		}
		return
	}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		ctx, cancel := s.background()
		defer cancel()
		s.stats.releases.Add(1)
		s.st.ReleaseLease(ctx, key, ls.id, uint64(q))
	}()
}

// dropNext ends e's lease fetched ahead, if any.
func (s *Leased) dropNext(key string, e *leasedKey) {
	if nx := e.next.Load(); nx != nil && e.next.CompareAndSwap(nx, nil) {
		s.endLater(key, nx)
	}
}

// sweep releases the leases of keys idle for a quarter of a lifetime, and
// forgets keys with nothing left, until Close.
func (s *Leased) sweep() {
	defer s.done.Done()
	tick := time.NewTicker(s.lifetime / 4)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		now := s.now()
		s.keys.Range(func(key string, e *leasedKey) bool {
			if now-e.used.Load() < int64(s.lifetime/4) {
				return true
			}
			s.releaseLater(key, e, e.cur.Load())
			s.dropNext(key, e)
			s.endLater(key, e.retired.Swap(nil))
			if now >= e.deniedUntil.Load() {
				s.keys.Delete(key)
			}
			return true
		})
	}
}

// Close stops the sweeper and gives every lease's unspent tokens back,
// waiting for the releases (each bounded by the store's timeout). Checks
// after Close still work. With Options.CloseStore it closes the store too.
func (s *Leased) Close() error {
	if s == nil {
		return engine.ErrNilLimiter
	}
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	s.keys.Range(func(key string, e *leasedKey) bool {
		s.releaseLater(key, e, e.cur.Load())
		s.dropNext(key, e)
		s.endLater(key, e.retired.Swap(nil))
		return true
	})
	s.done.Wait()
	if c, ok := s.st.(io.Closer); ok && s.owns {
		return c.Close()
	}
	return nil
}
