package envoyrls

import (
	"maps"
	"sync/atomic"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/faucetgo/faucet/engine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// overrideKey is a request-carried limit in one domain: each domain's
// overrides take room from that domain's share.
type overrideKey struct {
	domain  string
	perUnit uint32
	unit    pb.RateLimitResponse_RateLimit_Unit
	mult    uint32
}

// override is a bound request-carried limit.
type override struct {
	lim  engine.Limiter
	name string
	// refill is the time an empty bucket takes to fill: one unit (times
	// the multiplier).
	refill time.Duration
	// used is the last use, in Unix ns, kept to within usedStep.
	used atomic.Int64
}

const (
	// overrideMargin is added to an override's refill before its buckets
	// count as full: the engine rounds times to its tick.
	overrideMargin = time.Second
	// usedStep is how stale an override's last use may be: writing it on
	// every request would make every stream write one cache line.
	usedStep = 100 * time.Millisecond
	// sweepEvery is how often requests look for idle overrides to unbind.
	sweepEvery = time.Minute
)

func (o *override) touch(now time.Time) {
	n := now.UnixNano()
	if n-o.used.Load() >= int64(usedStep) {
		o.used.Store(n)
	}
}

// fullAt is when every bucket of o is full again, if it is not used
// before: unbinding it then loses nothing.
func (o *override) fullAt() time.Time {
	return time.Unix(0, o.used.Load()).Add(o.refill + overrideMargin)
}

// OverrideStats counts the request-carried limits.
type OverrideStats struct {
	// Bound is the overrides bound now, at most Options.MaxOverrides.
	Bound int
	// Evicted counts the overrides unbound to make room for a new one;
	// Refused the new ones that found no room, and were OVER_LIMIT.
	Evicted, Refused uint64
}

// OverrideStats returns the counts of request-carried limits.
func (s *Server) OverrideStats() OverrideStats {
	return OverrideStats{Bound: len(*s.overrides.Load()), Evicted: s.overridesEvicted.Load(), Refused: s.overridesRefused.Load()}
}

// override returns the request-carried limit k of descriptor i, checking
// and binding it on first use; or nil and the wait until there may be
// room for it, when its domain's share is taken by overrides whose
// buckets are not full.
func (s *Server) override(i int, k overrideKey, st *state, now time.Time) (*override, time.Duration, error) {
	if o, ok := (*s.overrides.Load())[k]; ok {
		o.touch(now)
		return o, 0, nil
	}
	if err := checkLimit(k.perUnit, k.unit, k.mult); err != nil {
		return nil, 0, status.Errorf(codes.InvalidArgument, "descriptors[%d].limit: %v", i, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := *s.overrides.Load()
	if o, ok := cur[k]; ok {
		o.touch(now)
		return o, 0, nil
	}
	// A copy, published on every way out: the sweep, an eviction or a new
	// binding may each have changed it.
	next := maps.Clone(s.swept(cur, now))
	defer func() { s.overrides.Store(&next) }()
	share := max(1, s.opts.MaxOverrides/max(1, len(st.cfg.domains)))
	held := map[string]int{}
	for kk := range next {
		held[kk.domain]++
	}
	if held[k.domain] >= share || len(next) >= s.opts.MaxOverrides {
		// The least recently used override whose buckets are full: in
		// this domain if it holds its share, else in a domain over its
		// own or no longer configured (a reload changed the domains).
		candidate := func(d string) bool {
			if held[k.domain] >= share {
				return d == k.domain
			}
			return held[d] > share || st.cfg.domains[d] == nil
		}
		var victim overrideKey
		var lru *override
		var firstFull time.Time
		for kk, o := range next {
			if !candidate(kk.domain) {
				continue
			}
			at := o.fullAt()
			if firstFull.IsZero() || at.Before(firstFull) {
				firstFull = at
			}
			if !at.After(now) && (lru == nil || o.used.Load() < lru.used.Load()) {
				victim, lru = kk, o
			}
		}
		if lru == nil {
			s.overridesRefused.Add(1)
			if firstFull.IsZero() {
				// Room comes when other domains' overrides go idle.
				firstFull = now.Add(s.opts.OverrideIdle)
			}
			return nil, firstFull.Sub(now), nil
		}
		delete(next, victim)
		s.store.Release(lru.lim)
		s.overridesEvicted.Add(1)
	}
	sp := overrideSpec(k.perUnit, k.unit, k.mult)
	l, err := s.store.Bind(sp)
	if err != nil {
		return nil, 0, status.Errorf(codes.Unavailable, "limit override %d per %s: %v", k.perUnit, k.unit, err)
	}
	o := &override{lim: l, name: sp.Name, refill: time.Duration(unitSeconds[k.unit]) * time.Duration(max(1, k.mult)) * time.Second}
	o.used.Store(now.UnixNano())
	next[k] = o
	return o, 0, nil
}

// swept returns m without the overrides unused for Options.OverrideIdle
// whose buckets are full, unbinding them: m itself if there are none,
// else a copy. It requires s.mu.
func (s *Server) swept(m map[overrideKey]*override, now time.Time) map[overrideKey]*override {
	s.lastSweep.Store(now.UnixNano())
	out := m
	for k, o := range m {
		if time.Unix(0, o.used.Load()).Add(s.opts.OverrideIdle).After(now) || o.fullAt().After(now) {
			continue
		}
		if len(out) == len(m) {
			out = maps.Clone(m)
		}
		delete(out, k)
		s.store.Release(o.lim)
		s.overridesEvicted.Add(1)
	}
	return out
}

// maybeSweep sweeps the overrides if none did for sweepEvery, unless
// another goroutine holds s.mu: requests never wait for it.
func (s *Server) maybeSweep() {
	if len(*s.overrides.Load()) == 0 {
		return
	}
	now := s.opts.Now()
	if now.UnixNano()-s.lastSweep.Load() < int64(sweepEvery) || !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	cur := *s.overrides.Load()
	if next := s.swept(cur, now); len(next) != len(cur) {
		s.overrides.Store(&next)
	}
}
