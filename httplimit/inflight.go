package httplimit

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/puzpuzpuz/xsync/v3"
)

// inFlight counts the requests each key of an in-flight limit has in
// flight. A key has an entry only while it has one: the entries are
// bounded by the requests in flight, which the server's connection cap
// bounds.
type inFlight struct {
	// max is the limit in force: a reload changes it in place, and the
	// requests in flight keep their slots.
	max atomic.Int64
	// held is the mean time a slot is held, in nanoseconds, over the
	// recent releases (each moves it an eighth of the way): what a
	// denial's Retry-After is estimated from.
	held atomic.Int64
	// total is the slots held across the keys; remoteHeld those this
	// process holds in a shared store, for a limit kept there.
	total, remoteHeld atomic.Int64
	keys              *xsync.MapOf[string, *slots]
}

// heldSlot is one slot a request holds: of key s of limit f, or in a
// shared store (remote).
type heldSlot struct {
	f      *inFlight
	s      *slots
	remote *remoteHold
}

// slots is one key's count of requests in flight. -1 marks an entry on
// its way out of the map: an acquire that finds it looks again.
type slots struct {
	n   atomic.Int64
	key string // the map's own copy of the key
}

func newInFlight(max int) *inFlight {
	f := &inFlight{keys: xsync.NewMapOf[string, *slots]()}
	f.max.Store(int64(max))
	return f
}

// acquire takes one of key's slots if one is free, and returns the entry
// to release it on; otherwise nil, and how many key has in flight. key
// may borrow bytes the caller reuses: the map keeps a copy.
//
// Lock-free but for a key's first slot: the count moves by
// CompareAndSwap; an entry is added or removed under the map's lock of
// its bucket.
func (f *inFlight) acquire(key string) (*slots, int64) {
	return f.acquireUpTo(key, f.max.Load())
}

// acquireUpTo is acquire with limit in place of the table's own.
func (f *inFlight) acquireUpTo(key string, limit int64) (*slots, int64) {
	for {
		s, ok := f.keys.Load(key)
		if !ok {
			s, _ = f.keys.LoadOrCompute(key, func() *slots { return &slots{key: strings.Clone(key)} })
		}
		for {
			n := s.n.Load()
			if n < 0 {
				break // removed meanwhile: look again
			}
			if n >= limit {
				return nil, n
			}
			if s.n.CompareAndSwap(n, n+1) {
				f.total.Add(1)
				return s, n + 1
			}
		}
	}
}

// inUse returns how many requests key has in flight, taking nothing.
func (f *inFlight) inUse(key string) int64 {
	if s, ok := f.keys.Load(key); ok {
		return max(s.n.Load(), 0)
	}
	return 0
}

// release gives back a slot of s, held for d, and removes the entry once
// the key has none in flight.
func (f *inFlight) release(s *slots, d time.Duration) {
	f.noteHeld(d)
	f.total.Add(-1)
	if s.n.Add(-1) != 0 || !s.n.CompareAndSwap(0, -1) {
		return
	}
	// Marked: no acquire can count on it any more. Only this entry is
	// removed; a successor cannot be in the map before it is gone.
	f.keys.Compute(s.key, func(cur *slots, loaded bool) (*slots, bool) {
		return cur, loaded && cur == s
	})
}

// noteHeld moves the mean time a slot is held an eighth of the way to d.
func (f *inFlight) noteHeld(d time.Duration) {
	for {
		old := f.held.Load()
		if f.held.CompareAndSwap(old, old+(int64(d)-old)/8) {
			return
		}
	}
}

// retryIn estimates whole seconds until one of a full key's slots is
// free: the mean time a slot is held over the slots there are, which is
// the expected wait for the first to end if requests last as long as
// they have lately. At least 1; 1 before any slot was released.
func (f *inFlight) retryIn() int64 {
	limit := max(f.max.Load(), 1)
	return max(1, int64(math.Ceil(float64(f.held.Load())/float64(limit)/float64(time.Second))))
}

// inFlightOf gives in-flight limit r its table: the one its ID had, so
// that a reload keeps the requests in flight counted, or a new one; into
// tables, the tables of the rule set being compiled. Its limit is set once
// the whole set compiled.
func (l *Middleware) inFlightOf(r *rule, tables map[string]*inFlight) error {
	ss, shared := l.opts.store.(engine.SlotStore)
	if !inMemory(l.opts.store) && !shared {
		return fmt.Errorf("httplimit: in-flight limit %q: the requests in flight are counted in this process, and the store is shared with others "+
			"but keeps no slots, where each process would admit max_in_flight of its own: in-flight limits need the in-memory store, or one that keeps slots", r.Name)
	}
	id := limitID(&r.Rule)
	f := tables[id]
	if f == nil {
		if f = l.inflight[id]; f == nil {
			f = newInFlight(r.MaxInFlight)
		}
		tables[id] = f
	}
	r.inflight = f
	if !inMemory(l.opts.store) {
		if err := l.remoteOf(r, id, ss, f); err != nil {
			return err
		}
	}
	if r.counters = l.counters[r.Name]; r.counters == nil {
		r.counters = &ruleCounters{}
		l.counters[r.Name] = r.counters
	}
	return nil
}

// inMemory reports whether st keeps its limits in this process.
func inMemory(st engine.Store) bool {
	m, ok := st.(interface{ InMemory() bool })
	return ok && m.InMemory()
}

// validateInFlightRule checks a rule that is an in-flight limit.
func validateInFlightRule(r *Rule, bad badFunc) {
	const pre = "algorithm_config."
	validateInFlight(r.MaxInFlight, pre+"max_in_flight", bad)
	if r.Rate != 0 || r.rateField != "" || r.Burst != 0 {
		bad(pre+"max_in_flight", "an in-flight limit has max_in_flight, not a rate or a burst")
	}
	if len(r.Limits) > 0 {
		bad("limits", `a rule with "algorithm": "concurrency" has one limit; give an in-flight limit among limits instead`)
	}
	if (r.CostSource != "" && r.CostSource != "fixed") || (r.FixedCost != 0 && r.FixedCost != 1) || (r.DefaultCost != 0 && r.DefaultCost != 1) ||
		r.MinCost != 0 || r.MaxCost != 0 || r.CostOutOfRange != "" {
		bad(pre+"cost_source", "an in-flight limit counts requests: each holds one slot, whatever its cost")
	}
}

// validateCheckOnly refuses the in-flight limits of rules that are only
// checked: nothing would ever release their slots.
func validateCheckOnly(rules []Rule, p *problems) {
	const why = "an in-flight limit needs to see its requests end, and this server only checks them (the check API): serve them through the proxy (--upstream) or the gRPC interceptors"
	for i := range rules {
		r := &rules[i]
		if r.MaxInFlight != 0 {
			p.add(r.Name, i, "algorithm", "%s", why)
		}
		for j := range r.Limits {
			if r.Limits[j].isInFlight() {
				p.add(r.Name, i, "limits["+itoa(j)+"].algorithm", "%s", why)
			}
		}
	}
}

// validateInFlight checks max_in_flight.
func validateInFlight(n int, field string, bad badFunc) {
	if n < 1 || n > maxInFlight {
		bad(field, "must be a whole number of requests from 1 to %d, got %d", maxInFlight, n)
	}
}

// acquireSlots takes, with hold, a slot of every enforce in-flight limit
// at slotIdx (all of them or none) into q's scratch; without, it checks
// that each has one free. It reports false when one has none: the request
// is then denied by it, and no other limit is taken from.
func (l *Middleware) acquireSlots(q *request, now time.Time, res *Result, applied []*rule, slotIdx []int, hold bool) bool {
	sc := q.sc
	sc.slotsAt = now
	for _, i := range slotIdx {
		ru, p := applied[i], &res.Policies[i]
		switch {
		case ru.remote != nil && !hold:
			// Check asks no store: it could not give the slot back.
			p.Unknown = true
		case ru.remote != nil:
			ok, denied := l.acquireRemote(q, now, res, ru, p)
			if ok {
				continue
			}
			l.releaseSlots(sc, now)
			if denied {
				l.denyInFlight(q, now, res, i, ru, p)
			} else { // the store failed, and the rule fails closed
				for j := range res.Policies {
					res.Policies[j].Unknown = true
				}
				res.Allowed, res.Status, res.Reason, res.RetryAfter = false, http.StatusServiceUnavailable, ReasonStoreUnavailable, 1
			}
			return false
		case !l.acquireLocal(sc, ru, p, hold):
			l.releaseSlots(sc, now)
			l.denyInFlight(q, now, res, i, ru, p)
			return false
		}
	}
	return true
}

// acquireLocal takes, with hold, a slot of ru's own table into sc, or
// checks that one is free, and fills p's state; it reports whether the
// key had one.
func (l *Middleware) acquireLocal(sc *scratch, ru *rule, p *Policy, hold bool) bool {
	f := ru.inflight
	limit := f.max.Load()
	var s *slots
	var n int64
	if hold {
		if s, n = f.acquire(p.Key); s == nil {
			return false
		}
		sc.slots[sc.nslots] = heldSlot{f: f, s: s}
		sc.nslots++
	} else if n = f.inUse(p.Key) + 1; n > limit { // as if it held one
		return false
	}
	p.Remaining = float64(limit - n)
	if p.Remaining < 1 {
		p.RetryIn = f.retryIn()
		p.FullIn = p.RetryIn
	}
	return true
}

// denyInFlight denies the request for in-flight limit ru (policy p, the
// i-th applied): its key has no slot free. No other limit was taken from.
func (l *Middleware) denyInFlight(q *request, now time.Time, res *Result, i int, ru *rule, p *Policy) {
	for j := range res.Policies {
		res.Policies[j].Unknown = j != i
	}
	p.Remaining, p.Denied = 0, true
	p.RetryIn = ru.inflight.retryIn()
	p.FullIn = p.RetryIn
	ru.counters.denied.Add(1)
	res.Allowed, res.Status, res.DeniedBy, res.Reason = false, http.StatusTooManyRequests, ru.Name, ReasonInFlightExceeded
	res.RetryAfter = p.RetryIn
	l.denied(q, now, ru, p, res.Reason)
}

// settleSlots completes the in-flight limits at slotIdx once the rate
// limits decided: a request they denied gives its slots back.
func (l *Middleware) settleSlots(q *request, res *Result, applied []*rule, slotIdx []int) {
	if !res.Allowed {
		l.releaseSlots(q.sc, q.sc.slotsAt)
		return
	}
	for _, i := range slotIdx {
		applied[i].counters.allow(&res.Policies[i])
	}
}

// observeSlots decides a shadow rule that is an in-flight limit (parts
// its one limit, ps its policy): with hold, an allowed request holds a
// slot if one is free, and otherwise the rule reports that it would
// have denied. It returns the parts left for observe: none for such a
// rule, all of them for any other (validation keeps in-flight limits out
// of a shadow rule's several).
func (l *Middleware) observeSlots(q *request, now time.Time, res *Result, parts []*rule, ps []Policy, hold bool) ([]*rule, []Policy) {
	ru := parts[0]
	if ru.inflight == nil {
		return parts, ps
	}
	p, f := &ps[0], ru.inflight
	limit := f.max.Load()
	n := f.inUse(p.Key)
	if !res.Allowed {
		p.Remaining = float64(max(limit-n, 0))
		return nil, nil
	}
	if ru.remote != nil {
		if !hold {
			p.Unknown = true
			return nil, nil
		}
		if q.sc.nslots == 0 {
			q.sc.slotsAt = now
		}
		switch ok, denied := l.acquireRemote(q, now, res, ru, p); {
		case ok:
			ru.counters.allow(p)
		case denied:
			l.shadowInFlightDenied(q, now, res, ru, p)
		default:
			p.Unknown = true
		}
		return nil, nil
	}
	var s *slots
	if hold {
		s, n = f.acquire(p.Key)
	} else if n < limit {
		s, n = &slots{}, n+1 // a slot would be free: nothing is held
	}
	if s == nil {
		l.shadowInFlightDenied(q, now, res, ru, p)
		return nil, nil
	}
	if hold {
		if q.sc.nslots == 0 {
			q.sc.slotsAt = now
		}
		q.sc.slots[q.sc.nslots] = heldSlot{f: f, s: s}
		q.sc.nslots++
	}
	p.Remaining = float64(limit - n)
	ru.counters.allow(p)
	return nil, nil
}

// shadowInFlightDenied reports that shadow in-flight limit ru (policy p)
// would have denied the request.
func (l *Middleware) shadowInFlightDenied(q *request, now time.Time, res *Result, ru *rule, p *Policy) {
	p.Remaining, p.Denied = 0, true
	p.RetryIn = ru.inflight.retryIn()
	p.FullIn = p.RetryIn
	ru.counters.shadowDenied.Add(1)
	if res.Reason == "" {
		res.DeniedBy, res.Reason = ru.Name, ReasonShadowPrefix+ReasonInFlightExceeded
	}
	l.denied(q, now, ru, p, ReasonInFlightExceeded)
}

// releaseSlots gives back every slot sc holds, taken at sc.slotsAt and
// released at now.
func (l *Middleware) releaseSlots(sc *scratch, now time.Time) {
	l.releaseAll(sc.slots[:sc.nslots], now.Sub(sc.slotsAt))
	clear(sc.slots[:sc.nslots])
	sc.nslots = 0
}

// releaseAll gives back slots, held for d; those of a shared store in
// the background, as the response is finished already.
func (l *Middleware) releaseAll(slots []heldSlot, d time.Duration) {
	for _, h := range slots {
		if h.remote != nil {
			h.f.noteHeld(d)
			// Counted as held until the store has it back (or the release
			// failed and is left to its retries).
			go func(h heldSlot) {
				l.releaseRemote(h.remote)
				h.f.remoteHeld.Add(-1)
			}(h)
			continue
		}
		h.f.release(h.s, d)
	}
}
