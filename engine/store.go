package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
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
	// Calendar, if set, makes the limit a calendar quota (Quota) of Burst
	// tokens per period; Limit is then Burst over the period's nominal
	// length. A store that keeps no calendar quotas refuses to bind it,
	// with an error that says so.
	Calendar *Calendar
	// Window, if positive, makes the limit a strict window (Window) of
	// Burst tokens in any span of Window, counted in Slots parts (0: 16);
	// Limit is then Burst over Window. A store that keeps no windows
	// refuses to bind it.
	Window time.Duration
	Slots  int
}

// WindowSpec returns the Spec of a strict window of n tokens in any span
// of window, counted in slots parts (0: 16), named id and name.
func WindowSpec(id, name string, n float64, window time.Duration, slots int) Spec {
	return Spec{ID: id, Name: name, Limit: Limit(n / window.Seconds()), Burst: n, Window: window, Slots: slots}
}

// BytesPerKey bounds from above what one key of the limit s describes
// costs in memory, in this process, its own bytes beyond 16 aside: about
// 55 for a token bucket or a calendar quota (a slot of the shard table at
// its lowest load), 100 plus 5 a slot for a strict window (its counts, its
// mutex and its map entry). Measured at 43-55, and at 103, 175 and 383
// for windows of 1, 16 and 64 slots.
func (s Spec) BytesPerKey() int {
	if s.kind() == 2 {
		return 100 + 5*(cmp.Or(s.Slots, defaultSlots)+1)
	}
	return 55
}

// kind is the shape of limit s describes: 0 a token bucket, 1 a quota, 2
// a window.
func (s Spec) kind() int {
	switch {
	case s.Calendar != nil:
		return 1
	case s.Window > 0:
		return 2
	}
	return 0
}

// limiterKind is kind for a bound Limiter.
func limiterKind(l Limiter) int {
	switch l.(type) {
	case QuotaRetuner:
		return 1
	case WindowRetuner:
		return 2
	}
	return 0
}

// WindowRetuner is implemented by strict windows, which change their limit
// in place, keeping what every key took: the Window, and the window
// limiters of remote stores. A Pool shares such a limiter among the Binds
// of an ID whose Spec has the same Window and Slots, and their caller
// applies each Spec with SetLimitTokens(Spec.Burst).
type WindowRetuner interface {
	Limiter
	// Span returns the window's span, and Slots how many parts it is
	// counted in.
	Span() time.Duration
	Slots() int
	// SetLimitTokens makes n the most a key may take in any span, as
	// Window.SetLimitTokens does. It fails, changing nothing, for a limit
	// NewWindow refuses.
	SetLimitTokens(n float64) error
}

// QuotaSpec returns the Spec of a calendar quota of n tokens per period
// of cal, named id and name.
func QuotaSpec(id, name string, n float64, cal Calendar) Spec {
	return Spec{ID: id, Name: name, Limit: Limit(n / cal.Period.Nominal().Seconds()), Burst: n, Calendar: &cal}
}

// sameCalendar reports whether a and b are one calendar (nil: none).
func sameCalendar(a, b *Calendar) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Period == b.Period && a.loc().String() == b.loc().String() && a.Month == b.Month && a.Day == b.Day &&
		a.Weekday == b.Weekday && a.Hour == b.Hour
}

// QuotaRetuner is implemented by calendar quotas, which change their quota
// and calendar in place, keeping what every key took: the Quota, and the
// quota limiters of remote stores. A Pool shares such a limiter among the
// Binds of an ID whose Spec has a Calendar, and their caller applies each
// Spec with SetQuota(Spec.Burst, *Spec.Calendar).
type QuotaRetuner interface {
	Limiter
	// Calendar returns the quota's own calendar.
	Calendar() Calendar
	// SetQuota gives every key n tokens per period of cal from now on,
	// as Quota.SetQuota does. It fails, changing nothing, for a quota or
	// calendar NewQuota refuses.
	SetQuota(n float64, cal Calendar) error
}

// CheckQuota reports what NewQuota would refuse in a quota of n tokens per
// period of cal: each field as a *LimitError (Quota; Period, Month, Day,
// Weekday, Hour).
func CheckQuota(n float64, cal Calendar) error {
	var errs []error
	if _, exact := fixedpoint.QuantizeExact(n); math.IsNaN(n) || n < 0.001 || n > maxQuota || !exact {
		errs = append(errs, &LimitError{Field: "Quota", Must: "be between 0.001 and 1e9 tokens, a multiple of 0.001", Got: fmt.Sprint(n)})
	}
	errs = append(errs, cal.Check())
	return errors.Join(errs...)
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
	// inMemory reports that open keeps its limits in this process.
	inMemory bool
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
	return NewInMemoryPool(func(s Spec) (Limiter, error) { return OpenInMemory(cfg, s) })
}

// NewInMemoryPool is NewPool for an open that keeps its limits in this
// process's memory (as OpenInMemory does): InMemory reports it.
func NewInMemoryPool(open func(Spec) (Limiter, error)) *Pool {
	p := NewPool(open)
	p.inMemory = true
	return p
}

// InMemory reports whether the Pool keeps its limits in this process,
// where no other process shares them: true for NewEnginePool's and
// NewInMemoryPool's, false for a remote store's. What only one process
// can keep, such as the requests it has in flight, is exact on such a
// Pool and per process on any other.
func (p *Pool) InMemory() bool { return p.inMemory }

// OpenInMemory opens the limiter of s in this process, configured as cfg
// but for the limit s gives: an Engine, a Quota (s.Calendar) or a Window
// (s.Window). It is the opener of NewEnginePool, for a Pool that checks
// Specs first.
func OpenInMemory(cfg Config, s Spec) (Limiter, error) {
	if s.Window > 0 {
		w, err := NewWindow(WindowConfig{Limit: s.Burst, Window: s.Window, Slots: s.Slots,
			SweepInterval: cfg.SweepInterval, MaxKeys: cfg.MaxKeys, OnFull: cfg.OnFull})
		if err != nil {
			return nil, err
		}
		return w, nil
	}
	if s.Calendar != nil {
		q, err := NewQuota(QuotaConfig{Quota: s.Burst, Calendar: *s.Calendar, Shards: cfg.Shards,
			SweepInterval: cfg.SweepInterval, MaxKeys: cfg.MaxKeys, OnFull: cfg.OnFull})
		if err != nil {
			return nil, err
		}
		return q, nil
	}
	c := cfg
	c.Limit, c.Burst = s.Limit, s.Burst
	e, err := New(c)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Bind returns the Limiter of s.ID as Store.Bind describes, opening one if
// none fits.
func (p *Pool) Bind(s Spec) (Limiter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.byID[s.ID] {
		if limiterKind(e.l) != s.kind() {
			continue // limits of different shapes never share
		}
		if w, ok := e.l.(WindowRetuner); ok {
			// A window of the same span and slots retunes its limit in
			// place (SetLimitTokens); another is apart.
			if w.Span() != s.Window || w.Slots() != cmp.Or(s.Slots, defaultSlots) {
				continue
			}
			if err := checkWindowLimit(s.Burst); err != nil {
				return nil, fmt.Errorf("%q: %w", s.Name, err)
			}
			e.refs++
			return e.l, nil
		}
		if _, ok := e.l.(QuotaRetuner); ok {
			// A quota retunes in place (the caller applies s with
			// SetQuota), keeping what every key took.
			if err := s.checkQuota(); err != nil {
				return nil, fmt.Errorf("%q: %w", s.Name, err)
			}
			e.refs++
			return e.l, nil
		}
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

// SweepAt sweeps every bound Engine and Quota at t (Engine.SweepAt,
// Quota.SweepAt) and returns how many keys it removed: for a Pool whose
// limiters run no sweeper (SweepInterval < 0) because its user decides on
// a clock of its own.
func (p *Pool) SweepAt(t time.Time) int {
	p.mu.Lock()
	sweepers := make([]interface{ SweepAt(time.Time) int }, 0, len(p.of))
	for l := range p.of {
		if sw, ok := l.(interface{ SweepAt(time.Time) int }); ok {
			sweepers = append(sweepers, sw)
		}
	}
	p.mu.Unlock()
	n := 0
	for _, sw := range sweepers {
		n += sw.SweepAt(t)
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

// checkQuota is NewQuota's check of a quota Spec's own fields.
func (s Spec) checkQuota() error { return CheckQuota(s.Burst, *s.Calendar) }
