package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Handler passes its first record on to the handler it wraps, then
// at most one per interval: a run of errors (a store that is down, an
// upstream that refuses, a flood of broken clients) costs a line per
// interval, not a line per request, and the log stays readable and cheap
// while it matters most.
//
// Nothing is dropped without a trace: the line that ends an interval is the
// latest record held back in it, with "suppressed" set to the number of
// the others, and a timer writes it even if the run stops in the middle of
// the interval; the lines plus their suppressed counts are every record.
// Flush writes a pending line at once (on shutdown).
//
// Handlers derived with WithAttrs or WithGroup share the throttle: one
// throttle is one class of errors, however its records are decorated.
type Handler struct {
	slog.Handler
	t *throttle
}

// throttle is the state a Handler and its derivatives share.
type throttle struct {
	every time.Duration

	mu sync.Mutex
	// timer ends the current interval; nil while no line was written in
	// the last interval, when the next record passes at once. gen numbers
	// the intervals, so that a timer that fires as Flush stops it does not
	// end the interval after.
	timer *time.Timer
	gen   uint64
	// held is the latest record held back in this interval, to be written
	// by the handler that received it; n counts the records held back.
	held   slog.Record
	heldBy slog.Handler
	n      int64
}

// NewHandler wraps h so that it writes at most a line per every.
func NewHandler(h slog.Handler, every time.Duration) *Handler {
	return &Handler{Handler: h, t: &throttle{every: every}}
}

// Handle passes r on, or holds it back if a line was written in this
// interval.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	t := h.t
	t.mu.Lock()
	if t.timer == nil {
		t.startInterval()
		t.mu.Unlock()
		return h.Handler.Handle(ctx, r)
	}
	t.held, t.heldBy = r.Clone(), h.Handler
	t.n++
	t.mu.Unlock()
	return nil
}

// WithAttrs returns a Handler sharing h's throttle.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{Handler: h.Handler.WithAttrs(attrs), t: h.t}
}

// WithGroup returns a Handler sharing h's throttle.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{Handler: h.Handler.WithGroup(name), t: h.t}
}

// startInterval opens an interval; t.mu is held.
func (t *throttle) startInterval() {
	t.gen++
	gen := t.gen
	t.timer = time.AfterFunc(t.every, func() { t.endInterval(gen) })
}

// endInterval writes the record held back in interval gen, if any; that
// line opens a new interval. After a quiet interval the next record passes
// at once.
func (t *throttle) endInterval(gen uint64) {
	t.mu.Lock()
	switch {
	case gen != t.gen: // flushed meanwhile
		t.mu.Unlock()
	case t.n == 0:
		t.timer = nil
		t.mu.Unlock()
	default:
		t.startInterval()
		t.writeHeld()
	}
}

// Flush writes the record held back, if any, without waiting for the end
// of its interval; the next record passes at once.
func (h *Handler) Flush() {
	t := h.t
	t.mu.Lock()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
		t.gen++
	}
	if t.n == 0 {
		t.mu.Unlock()
		return
	}
	t.writeHeld()
}

// writeHeld writes the latest record held back, with the number of the
// others. It is called with t.mu held and releases it, so that the write
// happens outside the lock.
func (t *throttle) writeHeld() {
	r, h, n := t.held, t.heldBy, t.n
	t.held, t.heldBy, t.n = slog.Record{}, nil, 0
	t.mu.Unlock()
	if n > 1 {
		r.AddAttrs(slog.Int64("suppressed", n-1))
	}
	h.Handle(context.Background(), r)
}
