package reload

import (
	"context"
	"sync"
	"time"
)

// Stage says where a reload failed.
type Stage int

const (
	// Read: the source could not be read.
	Read Stage = iota
	// Parse: what was read is not a valid configuration.
	Parse
	// Apply: what runs the configuration refused it.
	Apply
)

// Error is a failure of First, with the stage it failed at.
type Error struct {
	Stage Stage
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Handler puts a configuration in force and reports how reloads went.
type Handler[T any] struct {
	// Apply puts a new configuration in force; an error leaves the one in
	// force as it was.
	Apply func(T) error
	// Loaded is told of each configuration applied.
	Loaded func(T)
	// Failed is told of each problem, once (see the package doc).
	Failed func(Stage, error)
}

// First reads and parses src at start. The digest it returns seeds New, so
// that the first check does not parse again what is in force; an error is
// an *Error.
func First[T any](ctx context.Context, src Source[T]) (T, Digest, error) {
	var zero T
	v, err := src.Read(ctx)
	if err != nil {
		return zero, Digest{}, &Error{Read, err}
	}
	t, err := v.Parse()
	if err != nil {
		return zero, Digest{}, &Error{Parse, err}
	}
	return t, v.Digest, nil
}

// Reloader keeps one configuration up to date with its source. Its
// methods may be called from several goroutines; reloads are serialised.
type Reloader[T any] struct {
	src     Source[T]
	watched Watched[T]
	h       Handler[T]

	mu      sync.Mutex
	digest  Digest // of the content last parsed; guarded by mu
	readErr string // the read error last reported; guarded by mu
}

// New returns a Reloader of src, whose configuration in force was read
// with digest d (First's).
func New[T any](src Source[T], d Digest, h Handler[T]) *Reloader[T] {
	return &Reloader[T]{src: src, h: h, digest: d}
}

// NewWatched returns a Reloader of a source that watches itself.
func NewWatched[T any](w Watched[T], h Handler[T]) *Reloader[T] {
	return &Reloader[T]{watched: w, h: h}
}

// Check reloads the configuration if its source changed, or, if forced,
// whatever it holds. A watched source is asked to read again when forced,
// and left to notice changes itself otherwise.
func (r *Reloader[T]) Check(ctx context.Context, forced bool) {
	if r.watched != nil {
		if forced {
			r.watched.Refresh()
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	v, err := r.src.Read(ctx)
	if err != nil {
		// A file being replaced may be missing for a moment, and a missing
		// file stays missing: report each new error once, not every check.
		if forced || err.Error() != r.readErr {
			r.readErr = err.Error()
			r.h.Failed(Read, err)
		}
		return
	}
	r.readErr = ""
	if !forced && v.Digest == r.digest {
		return
	}
	// Recorded before parsing: a content that fails is reported once.
	r.digest = v.Digest
	t, err := v.Parse()
	if err != nil {
		r.h.Failed(Parse, err)
		return
	}
	r.apply(t)
}

// apply puts t in force and reports; r.mu is held.
func (r *Reloader[T]) apply(t T) {
	if err := r.h.Apply(t); err != nil {
		r.h.Failed(Apply, err)
		return
	}
	r.h.Loaded(t)
}

// deliver applies a reading of a watched source, which delivers only
// changes (or what Refresh asked for): every one is applied or reported.
func (r *Reloader[T]) deliver(t T, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.h.Failed(Read, err)
		return
	}
	r.apply(t)
}

// Run watches the source until ctx is done: a watched source by itself, any
// other by a check on every tick (nil: none, only the forced checks of
// Check).
func (r *Reloader[T]) Run(ctx context.Context, tick <-chan time.Time) {
	if r.watched != nil {
		r.watched.Watch(ctx, r.deliver)
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			r.Check(ctx, false)
		}
	}
}
