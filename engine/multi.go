package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// MaxParts is the most limits a Multi holds. Up to it, a Multi of Engines
// decides a key with every part's state on the stack, allocating nothing.
const MaxParts = 8

// TakeAll holds the takes of a Multi's parts on the stack only up to
// heldOnStack: the build fails if MaxParts outgrows it.
var _ [heldOnStack - MaxParts]struct{}

// expandOnStack is how many takes, every Multi counted as its parts, a
// TakeAll expands without allocating.
const expandOnStack = 2 * MaxParts

// Multi is one Limiter made of several: every take is decided on the same
// key by every part, all taken or none, as one TakeAll of the parts. "10 a
// second and 10,000 a day per API key" is a Multi of two limiters.
//
// A Multi's Decision is allowed when every part allowed; Remaining is the
// smallest of the parts' (the most the next take can take at once);
// RetryAfter and ResetAfter are the longest (InfDuration when a part can
// never allow the take). TakeParts reports each part's own Decision and the
// part that denied.
//
// The parts are limiters of one store: Engines (All or AllEngines), or
// limiters of one remote store that its TakeAll decides together, such as
// redisstore's on one client. A Multi of Engines allocates nothing on a key
// that has buckets; a Multi of another store goes through its TakeAll,
// with that store's costs and guarantees.
//
// Under concurrency the guarantee is Engine.TakeAllAt's (or the store's):
// a caller may be denied for tokens that a denied take is about to give
// back, and no part's bucket ever admits more than it would alone.
//
// A Multi owns its parts: Close closes them. It is not a Retuner: retune
// the parts. It is safe for simultaneous use. The methods that return an
// error return one wrapping ErrNilLimiter on a nil Multi or MultiAt; the
// others panic, as an Engine's do.
type Multi struct {
	// parts are the limits, none a Multi, 1 to MaxParts of them.
	parts []Limiter
	// engines is set when every part is an *Engine: the Multi is then
	// decided by the engine's own TakeAll, without a dynamic call, so that
	// nothing escapes to the heap.
	engines bool
}

// MultiAt is a Multi of Engines: it also takes the time from the caller
// (TakerAt), as AllowAt and TakeAllAt do, for tests, simulations and layers
// with a clock of their own. AllEngines makes one.
type MultiAt struct {
	Multi
}

var (
	_ Limiter = (*Multi)(nil)
	_ TakerAt = (*MultiAt)(nil)
)

// All returns a Multi of parts: from 1 to MaxParts limiters, none nil, none
// given twice, all of one store (every one an *Engine, or every one of the
// first's type). A part that is a Multi counts as its parts. The parts of
// a remote store must also be ones its TakeAll decides together (for
// redisstore, on one client); that is checked at each take, which then
// fails wrapping ErrForeignTake. Errors name the argument and wrap
// ErrInvalidConfig, ErrNilLimiter or ErrForeignTake.
//
// A Multi of Engines made by All takes at each engine's clock; AllEngines
// makes one that also takes the caller's time (MultiAt).
func All(parts ...Limiter) (*Multi, error) {
	return newMulti("All", parts)
}

// AllEngines returns a MultiAt of parts, as All does: from 1 to MaxParts
// Engines, none nil, none given twice.
func AllEngines(parts ...*Engine) (*MultiAt, error) {
	ls := make([]Limiter, len(parts))
	for i, e := range parts {
		if e == nil {
			return nil, fmt.Errorf("%w: AllEngines: parts[%d] is nil", ErrNilLimiter, i)
		}
		ls[i] = e
	}
	m, err := newMulti("AllEngines", ls)
	if err != nil {
		return nil, err
	}
	return &MultiAt{Multi: *m}, nil
}

// newMulti is All, its errors naming the function fn.
func newMulti(fn string, parts []Limiter) (*Multi, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: %s: no parts, want 1 to %d", ErrInvalidConfig, fn, MaxParts)
	}
	var flat []Limiter
	var from []int // the argument each of flat came from
	for i, p := range parts {
		m, isMulti := multiOf(p)
		switch e, isEngine := p.(*Engine); {
		case p == nil || isMulti && m == nil || isEngine && e == nil:
			return nil, fmt.Errorf("%w: %s: parts[%d] is nil", ErrNilLimiter, fn, i)
		case isMulti:
			for _, q := range m.parts {
				flat, from = append(flat, q), append(from, i)
			}
		default:
			flat, from = append(flat, p), append(from, i)
		}
	}
	if len(flat) > MaxParts {
		return nil, fmt.Errorf("%w: %s: %d parts (a Multi counts as its parts), want 1 to %d", ErrInvalidConfig, fn, len(flat), MaxParts)
	}
	// Every store's TakeAll accepts only its own type: one type is what
	// can be checked here, whatever the store.
	first := reflect.TypeOf(flat[0])
	for j, p := range flat {
		if ty := reflect.TypeOf(p); ty != first {
			return nil, fmt.Errorf("%w: %s: parts[%d] is a %v, parts[%d] a %v: a Multi's parts must be limiters of one store",
				ErrForeignTake, fn, from[j], ty, from[0], first)
		}
		// A limiter given twice would take every cost twice from one
		// bucket. Values without == (a struct holding a slice) are not
		// compared: == would panic.
		for k := range j {
			if reflect.ValueOf(p).Comparable() && flat[k] == p {
				return nil, fmt.Errorf("%w: %s: parts[%d] is parts[%d] again, whose buckets would pay every take twice", ErrInvalidConfig, fn, from[j], from[k])
			}
		}
	}
	_, engines := flat[0].(*Engine)
	return &Multi{parts: flat, engines: engines}, nil
}

// multiOf returns l's Multi if l is a *Multi or a *MultiAt: (nil, true) for
// a nil one, (nil, false) for any other limiter.
func multiOf(l Limiter) (*Multi, bool) {
	switch m := l.(type) {
	case *Multi:
		return m, true
	case *MultiAt:
		if m == nil {
			return nil, true
		}
		return &m.Multi, true
	}
	return nil, false
}

// Parts returns a copy of the Multi's parts, every Multi given to All
// replaced by its own.
func (m *Multi) Parts() []Limiter {
	return append([]Limiter(nil), m.parts...)
}

// Limit returns the lowest Limit of the parts: no key can be admitted
// faster for long, whatever the bursts. It is a bound, not one bucket's
// rate: the part with the lowest Burst may be another.
func (m *Multi) Limit() Limit {
	l := m.parts[0].Limit()
	for _, p := range m.parts[1:] {
		l = min(l, p.Limit())
	}
	return l
}

// Burst returns the lowest Burst of the parts: the largest cost that can
// ever pass, since a take above any part's Burst is denied for ever.
func (m *Multi) Burst() float64 {
	b := m.parts[0].Burst()
	for _, p := range m.parts[1:] {
		b = min(b, p.Burst())
	}
	return b
}

// Close closes every part and returns their errors joined.
func (m *Multi) Close() error {
	if m == nil {
		return ErrNilLimiter
	}
	var errs []error
	for _, p := range m.parts {
		if err := p.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Take takes n tokens from key's bucket of every part, or from none, and
// returns the Decisions of the parts folded into one (see Multi). The
// error is the parts' TakeAll's; for Engines, nil unless m is nil.
func (m *Multi) Take(ctx context.Context, key string, n float64) (Decision, error) {
	if m == nil {
		return Decision{}, ErrNilLimiter
	}
	var out [MaxParts]Decision
	_, err := m.takeParts(ctx, time.Time{}, false, key, n, out[:len(m.parts)])
	return fold(out[:len(m.parts)]), err
}

// TakeParts is Take, reporting each part's Decision in out[i] for part i
// (Parts' order) and the index of the part that denied, or -1 when all
// were taken; on a denial no part took anything, as for TakeAll. out must
// hold a Decision per part (else ErrShortOut, and nothing is taken).
func (m *Multi) TakeParts(ctx context.Context, key string, n float64, out []Decision) (denied int, err error) {
	if m == nil {
		return -1, ErrNilLimiter
	}
	if len(out) < len(m.parts) {
		return -1, fmt.Errorf("%w: %d parts, %d decisions", ErrShortOut, len(m.parts), len(out))
	}
	return m.takeParts(ctx, time.Time{}, false, key, n, out[:len(m.parts)])
}

// takeParts takes n from key's bucket of every part, at t if explicit.
func (m *Multi) takeParts(ctx context.Context, t time.Time, explicit bool, key string, n float64, out []Decision) (int, error) {
	var takes [MaxParts]Take
	for i, p := range m.parts {
		takes[i] = Take{Limiter: p, Key: key, N: n}
	}
	if m.engines {
		return takeEngines(t, explicit, takes[:len(m.parts)], out), nil
	}
	return takeStore(ctx, m.parts[0], takes[:len(m.parts)], out)
}

// TakeAll takes every take's tokens, or none, as Engine.TakeAllAt does: a
// take naming a Multi is decided by all its parts, on its key, and out[i]
// is its parts' Decisions folded into one (see Multi); denied is the index
// of the take denied. A Multi of Engines accepts Engines and Multis of
// Engines (and so does Engine.TakeAll); a Multi of another store accepts
// that store's limiters and Multis of them, and its TakeAll decides all
// the parts together. Misuse is an error that takes nothing, as for
// Engine.TakeAllAt; a store's own error about a take counts the takes part
// by part.
//
// For Engines it allocates nothing on keys that have buckets when the takes,
// each Multi counted as its parts, number at most 8.
func (m *Multi) TakeAll(ctx context.Context, takes []Take, out []Decision) (int, error) {
	if m == nil {
		return -1, ErrNilLimiter
	}
	if m.engines {
		return takeAll(time.Time{}, false, takes, out)
	}
	return m.storeTakeAll(ctx, takes, out)
}

// Take is Multi.Take; on a nil m, an error wrapping ErrNilLimiter.
func (m *MultiAt) Take(ctx context.Context, key string, n float64) (Decision, error) {
	if m == nil {
		return Decision{}, ErrNilLimiter
	}
	return m.Multi.Take(ctx, key, n)
}

// TakeParts is Multi.TakeParts; on a nil m, an error wrapping
// ErrNilLimiter.
func (m *MultiAt) TakeParts(ctx context.Context, key string, n float64, out []Decision) (denied int, err error) {
	if m == nil {
		return -1, ErrNilLimiter
	}
	return m.Multi.TakeParts(ctx, key, n, out)
}

// TakeAll is Multi.TakeAll; on a nil m, an error wrapping ErrNilLimiter.
func (m *MultiAt) TakeAll(ctx context.Context, takes []Take, out []Decision) (int, error) {
	if m == nil {
		return -1, ErrNilLimiter
	}
	return m.Multi.TakeAll(ctx, takes, out)
}

// Close is Multi.Close; on a nil m, an error wrapping ErrNilLimiter.
func (m *MultiAt) Close() error {
	if m == nil {
		return ErrNilLimiter
	}
	return m.Multi.Close()
}

// TakeAllAt is TakeAll at time t: Engine.TakeAllAt, which accepts Multis
// of Engines.
func (m *MultiAt) TakeAllAt(t time.Time, takes []Take, out []Decision) (int, error) {
	if m == nil {
		return -1, ErrNilLimiter
	}
	return takeAll(t, true, takes, out)
}

// AllowAt takes n tokens from key's bucket of every part at time t, or
// from none, as Engine.AllowAt does for one, and returns the parts'
// Decisions folded into one (see Multi).
func (m *MultiAt) AllowAt(t time.Time, key string, n float64) Decision {
	var out [MaxParts]Decision
	m.takeParts(context.Background(), t, true, key, n, out[:len(m.parts)])
	return fold(out[:len(m.parts)])
}

// TakePartsAt is TakeParts at time t.
func (m *MultiAt) TakePartsAt(t time.Time, key string, n float64, out []Decision) (denied int, err error) {
	if m == nil {
		return -1, ErrNilLimiter
	}
	if len(out) < len(m.parts) {
		return -1, fmt.Errorf("%w: %d parts, %d decisions", ErrShortOut, len(m.parts), len(out))
	}
	return m.takeParts(context.Background(), t, true, key, n, out[:len(m.parts)])
}

// fold is the Decision of a Multi whose parts decided ds.
func fold(ds []Decision) Decision {
	d := ds[0]
	for _, p := range ds[1:] {
		d.Allowed = d.Allowed && p.Allowed
		d.Remaining = min(d.Remaining, p.Remaining)
		d.RetryAfter = max(d.RetryAfter, p.RetryAfter)
		d.ResetAfter = max(d.ResetAfter, p.ResetAfter)
	}
	return d
}

// partsOf is how many takes t stands for: a Multi's parts, else 1.
func partsOf(t *Take) int {
	if m, _ := multiOf(t.Limiter); m != nil {
		return len(m.parts)
	}
	return 1
}

// expand appends to into the takes with every Multi replaced by its parts,
// and sets ends[i] to the end in the result of takes[i]'s.
func expand(takes []Take, into []Take, ends []int) []Take {
	for i := range takes {
		if m, _ := multiOf(takes[i].Limiter); m != nil {
			for _, p := range m.parts {
				into = append(into, Take{Limiter: p, Key: takes[i].Key, N: takes[i].N})
			}
		} else {
			into = append(into, takes[i])
		}
		ends[i] = len(into)
	}
	return into
}

// collapse folds the Decisions of expanded takes back into out, one per
// original take (ends as expand set them), and returns the index of the
// original take that holds the expanded index k (-1 for -1).
func collapse(out, parts []Decision, ends []int, k int) int {
	denied, lo := -1, 0
	for i, hi := range ends {
		out[i] = fold(parts[lo:hi])
		if lo <= k && k < hi {
			denied = i
		}
		lo = hi
	}
	return denied
}

// takeExpanded is TakeAllAt of takes that checkTakes accepted, some naming
// Multis of Engines.
func takeExpanded(t time.Time, explicit bool, takes []Take, out []Decision, locals bool) int {
	n := 0
	for i := range takes {
		n += partsOf(&takes[i])
	}
	var (
		takeBuf [expandOnStack]Take
		outBuf  [expandOnStack]Decision
		endBuf  [expandOnStack]int
	)
	exp, parts, ends := takeBuf[:0], outBuf[:], endBuf[:]
	if n > expandOnStack {
		exp, parts, ends = make([]Take, 0, n), make([]Decision, n), make([]int, len(takes))
	}
	exp = expand(takes, exp, ends)
	var k int
	if locals {
		k = takeWithLocals(t, explicit, exp, parts)
	} else {
		k = takeEngines(t, explicit, exp, parts)
	}
	return collapse(out, parts[:n], ends[:len(takes)], k)
}

// storeTakeAll is TakeAll of a Multi of a store other than the Engine.
func (m *Multi) storeTakeAll(ctx context.Context, takes []Take, out []Decision) (int, error) {
	if len(out) < len(takes) {
		return -1, fmt.Errorf("%w: %d takes, %d decisions", ErrShortOut, len(takes), len(out))
	}
	n := 0
	for i := range takes {
		l := takes[i].Limiter
		mm, isMulti := multiOf(l)
		_, isEngine := l.(*Engine)
		switch {
		case l == nil || isMulti && mm == nil:
			return -1, fmt.Errorf("%w: takes[%d]", ErrNilLimiter, i)
		case isEngine || isMulti && mm.engines:
			return -1, fmt.Errorf("%w: takes[%d] is decided by Engines, this Multi by its %T parts", ErrForeignTake, i, m.parts[0])
		}
		n += partsOf(&takes[i])
	}
	ends := make([]int, len(takes))
	exp := expand(takes, make([]Take, 0, n), ends)
	parts := make([]Decision, n)
	k, err := m.parts[0].TakeAll(ctx, exp, parts)
	if err != nil && (errors.Is(err, ErrForeignTake) || errors.Is(err, ErrNilLimiter) || errors.Is(err, ErrShortOut)) {
		// Misuse: nothing taken, out untouched.
		return -1, fmt.Errorf("engine: Multi (takes counted part by part): %w", err)
	}
	return collapse(out, parts, ends, k), err
}

// takeStore is l.TakeAll(ctx, takes, out), through copies: slices given to
// a dynamic call escape to the heap, and the callers' arrays are on the
// stack for the Engine's sake.
func takeStore(ctx context.Context, l Limiter, takes []Take, out []Decision) (int, error) {
	tk := append([]Take(nil), takes...)
	o := make([]Decision, len(out))
	k, err := l.TakeAll(ctx, tk, o)
	copy(out, o)
	return k, err
}
