package httplimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// MemoryOptions configures a MemoryStore; the zero value is usable.
type MemoryOptions struct {
	// MaxKeys bounds the live buckets of each rule (engine.Config.MaxKeys);
	// 0 means unbounded. Behind a public edge, where every client address
	// or header value makes a bucket, set it.
	MaxKeys int
	// OnFull decides the keys that find MaxKeys buckets live and none full
	// (engine.Config.OnFull): engine.FullShare, the default, limits them
	// together through one overflow bucket per rule, with the rule's rate
	// and burst; engine.FullDeny denies them. RuleStats.Overflow counts
	// them.
	OnFull engine.FullPolicy
	// SweepInterval is engine.Config.SweepInterval: 0 for the default.
	SweepInterval time.Duration
}

// MemoryStore keeps each rule's buckets in an engine.Engine in this process.
// It is safe for concurrent use. Close stops the engines' sweepers.
//
// It is a Retuner. Limiters that share one share the buckets of rules with
// the same name and limit_keys, with the rate and burst of the last New or
// Reload that bound them.
type MemoryStore struct {
	opts MemoryOptions
	mu   sync.Mutex
	byID map[string]*memLimit // bound limits, by Limit.ID; guarded by mu
}

// memLimit is a MemoryStore's Handle.
type memLimit struct {
	e    *engine.Engine
	id   string
	refs int // guarded by MemoryStore.mu
}

var _ Retuner = (*MemoryStore)(nil)
var _ BucketStatser = (*MemoryStore)(nil)

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore(opts MemoryOptions) *MemoryStore {
	return &MemoryStore{opts: opts, byID: map[string]*memLimit{}}
}

// Bind returns the engine of l.ID, creating it on first use. An engine
// already bound keeps its rate and burst; if l's differ, Bind checks that
// Retune can apply them (an error otherwise) and changes nothing.
func (s *MemoryStore) Bind(l Limit) (Handle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.byID[l.ID]
	if m != nil && m.has(l) {
		m.refs++
		return m, nil
	}
	if m != nil {
		// Retune will apply l's limit with SetAt, which accepts what
		// CheckLimit does.
		if err := engine.CheckLimit(engine.Limit(l.Rate), l.Burst); err != nil {
			return nil, fmt.Errorf("httplimit: rule %q: %w", l.Name, err)
		}
		m.refs++
		return m, nil
	}
	e, err := engine.New(engine.Config{
		Limit:         engine.Limit(l.Rate),
		Burst:         l.Burst,
		MaxKeys:       s.opts.MaxKeys,
		OnFull:        s.opts.OnFull,
		SweepInterval: s.opts.SweepInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("httplimit: rule %q: %w", l.Name, err)
	}
	m = &memLimit{e: e, id: l.ID, refs: 1}
	s.byID[l.ID] = m
	return m, nil
}

// Retune changes the engine of h to l's rate and burst at now, keeping every
// bucket's tokens (engine.Engine.SetAt), unless it has them already. It
// panics if Bind would have refused l.
func (s *MemoryStore) Retune(h Handle, l Limit, now time.Time) {
	m := h.(*memLimit)
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.has(l) {
		return
	}
	if err := m.e.SetAt(now, engine.Limit(l.Rate), l.Burst); err != nil {
		panic(fmt.Sprintf("httplimit: Retune of rule %q to a limit Bind refuses: %v", l.Name, err))
	}
}

// has reports whether m's engine has l's rate and burst.
func (m *memLimit) has(l Limit) bool {
	return float64(m.e.Limit()) == l.Rate && m.e.Burst() == l.Burst
}

// Release drops the engine once every Bind of its ID is released. The engine
// keeps answering takes in flight; only its sweeper stops.
func (s *MemoryStore) Release(h Handle) {
	m := h.(*memLimit)
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.refs--; m.refs == 0 {
		delete(s.byID, m.id)
		m.e.Close()
	}
}

// TakeAll is engine.AllowAllAt over the bound engines; it never fails.
func (s *MemoryStore) TakeAll(_ context.Context, now time.Time, takes []Take, out []engine.Decision) (int, error) {
	var stack [maxTakes]engine.Take
	ets := stack[:0]
	if len(takes) > maxTakes {
		ets = make([]engine.Take, 0, len(takes))
	}
	for _, t := range takes {
		ets = append(ets, engine.Take{Limiter: t.Handle.(*memLimit).e, Key: t.Key, N: t.N})
	}
	return (*engine.Engine)(nil).TakeAllAt(now, ets, out)
}

// BucketStats reports the engine's live, evicted and overflowing buckets.
func (s *MemoryStore) BucketStats(h Handle) (BucketCounts, bool) {
	st := h.(*memLimit).e.Stats()
	return BucketCounts{Live: st.Live, Evicted: st.Evicted, Overflow: st.Overflow}, true
}

// Close stops the sweepers of every bound engine. The store keeps working.
func (s *MemoryStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.byID {
		m.e.Close()
	}
	return nil
}
