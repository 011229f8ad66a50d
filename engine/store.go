package engine

import (
	"fmt"
	"sync"
	"time"
)

// Spec is one limit that a Store binds: in httplimit, a rule's.
type Spec struct {
	// ID names the buckets. Binds of one ID share one Limiter, so a reload
	// that keeps a rule's ID keeps its buckets. It is printable ASCII
	// without spaces.
	ID string
	// Name is what errors and metrics call the limit.
	Name  string
	Limit Limit
	Burst float64
}

// Store makes and shares the Limiters of many limits, such as the rules of
// an httplimit middleware, which bind them when the rules load and release
// them when a reload drops them.
type Store interface {
	// Bind returns the Limiter of s. While a Bind of s.ID is unreleased,
	// another Bind of s.ID returns the same Limiter if it is a Retuner
	// (whose caller then applies s.Limit and s.Burst with SetAt; Bind fails
	// if SetAt would), or if its Limit and Burst are s's; otherwise a
	// Limiter whose buckets are apart from the first's, which start full.
	Bind(s Spec) (Limiter, error)
	// Release undoes one Bind of l. The Limiter is closed when the last
	// Bind of it is released; takes still in flight keep working.
	Release(l Limiter)
}

// Pool is a Store that opens each Limiter with a function and counts the
// Binds of each. Stores build on it: a Pool of Engines keeps limits in
// memory, and package redisstore returns a Pool of its limiters. It is safe
// for concurrent use.
type Pool struct {
	open func(Spec) (Limiter, error)
	mu   sync.Mutex
	// byID holds the bound Limiters of each ID: usually one, more while a
	// changed limit of a non-Retuner is bound beside its predecessor.
	byID map[string][]*pooled
	// of finds the entry of a Limiter on Release.
	of map[Limiter]*pooled
}

// pooled is one Limiter of a Pool and its count of Binds, guarded by
// Pool.mu.
type pooled struct {
	l    Limiter
	id   string
	refs int
}

var _ Store = (*Pool)(nil)

// NewPool returns a Pool that opens the Limiter of a Spec with open, which
// must return a Limiter with the Spec's Limit and Burst or an error naming
// what is wrong.
func NewPool(open func(Spec) (Limiter, error)) *Pool {
	return &Pool{open: open, byID: map[string][]*pooled{}, of: map[Limiter]*pooled{}}
}

// NewEnginePool returns a Pool of Engines configured as cfg, except for the
// Limit and Burst that each Spec gives.
func NewEnginePool(cfg Config) *Pool {
	return NewPool(func(s Spec) (Limiter, error) {
		c := cfg
		c.Limit, c.Burst = s.Limit, s.Burst
		e, err := New(c)
		if err != nil {
			return nil, err
		}
		return e, nil
	})
}

// Bind returns the Limiter of s.ID as Store.Bind describes, opening one if
// none fits.
func (p *Pool) Bind(s Spec) (Limiter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.byID[s.ID] {
		if e.l.Limit() == s.Limit && e.l.Burst() == s.Burst {
			e.refs++
			return e.l, nil
		}
		if _, ok := e.l.(Retuner); ok {
			if err := CheckLimit(s.Limit, s.Burst); err != nil {
				return nil, fmt.Errorf("%q: %w", s.Name, err)
			}
			e.refs++
			return e.l, nil
		}
	}
	l, err := p.open(s)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s.Name, err)
	}
	e := &pooled{l: l, id: s.ID, refs: 1}
	p.byID[s.ID] = append(p.byID[s.ID], e)
	p.of[l] = e
	return l, nil
}

// Release undoes one Bind of l and closes l after the last. A Limiter the
// Pool does not hold is ignored.
func (p *Pool) Release(l Limiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.of[l]
	if e == nil {
		return
	}
	if e.refs--; e.refs > 0 {
		return
	}
	delete(p.of, l)
	list := p.byID[e.id]
	for i := range list {
		if list[i] == e {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.byID, e.id)
	} else {
		p.byID[e.id] = list
	}
	e.l.Close()
}

// SweepAt sweeps every bound Engine at t (Engine.SweepAt) and returns how
// many buckets it evicted: for a Pool whose Engines run no sweeper
// (SweepInterval < 0) because its user decides on a clock of its own.
func (p *Pool) SweepAt(t time.Time) int {
	p.mu.Lock()
	engines := make([]*Engine, 0, len(p.of))
	for l := range p.of {
		if e, ok := l.(*Engine); ok {
			engines = append(engines, e)
		}
	}
	p.mu.Unlock()
	n := 0
	for _, e := range engines {
		n += e.SweepAt(t)
	}
	return n
}

// Len returns the number of Limiters bound.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.of)
}

// Close closes every bound Limiter and returns the first error. They stay
// bound and keep working, as far as their stores allow after Close.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for l := range p.of {
		if err := l.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
