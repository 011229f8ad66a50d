package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
)

// Window is a strict rolling window whose keys live in the bucket table: a
// key never takes more than Limit in any span of the window, shared by
// every instance on the same table and Prefix, with the Decisions of
// engine.Window. A Store binds one for a Spec with a Window; Limiters,
// Quotas and Windows of one Store decide a TakeAll together, in one
// statement, all or none.
//
// The database's clock decides, as for token buckets: the statement reads
// it and counts a take in its slot (the window's span over its Slots,
// rounded up to a nanosecond, as engine.Window counts them). A take is
// admitted if what the key took in that slot and the Slots slots before
// it, plus the cost, is at most Limit. A take whose time is before the
// key's newest slot (a database clock that stepped back) counts in that
// newest slot, as in memory. A denial or a peek writes nothing, so the
// newest slot is that of the key's last take (engine.Window also moves a
// key on a denial): a take after a clock stepped back counts in that slot,
// or in its own if later. Either way no span of the key's timeline holds
// more than Limit.
//
// A denial writes nothing. RetryAfter, Remaining and ResetAfter are
// engine.Window's: the time until enough of the oldest slots leave the
// window (InfDuration for a cost above Limit), Limit less what the window
// holds, the time until all of it has left. A key's row holds its newest
// slot, the sum and the counts of the Slots+1 slots up to it (a bigint[]
// column that token buckets leave NULL: one table, one lock order and one
// sweep for every shape of limit), and expires when all its counts have
// left the window: Sweep removes it then (a row whose counts all left and
// a missing row are the same). One consequence, as for token buckets and
// quotas: a database clock that steps back after a sweep removed a key's
// row finds no counts, and the key starts afresh.
//
// While the database fails, a Store's Window falls back as its Limiters do
// (StoreOptions.FallbackShare): to a local engine.Window of the same span
// and slots with a share of Limit, its error wrapping engine.ErrFallback.
// Each instance's local window starts from nothing taken, so an outage may
// admit up to a Limit more per key and window across the instances, as a
// token bucket's fallback may admit up to a burst more.
//
// A Window's takes do not coalesce: each is a statement of its own.
type Window struct{ l *Limiter }

var _ engine.WindowRetuner = (*Window)(nil)

// newWindow returns the Window of spec, a Spec with a Window, with the
// Store's options: rows under Prefix, the ID, then "window:", the span and
// the slots (windows of another span or slots never read each other's
// counts); its fallback is a local window at FallbackShare of spec's
// limit, or at 1/N with peers.
func newWindow(db DB, o *StoreOptions, spec engine.Spec, peers *Peers) (*Window, error) {
	w, err := remote.NewWindow(spec.Burst, spec.Window, spec.Slots, ErrInvalidConfig)
	if err != nil {
		return nil, err
	}
	// A token bucket's checks, of a limit every option combines with, for
	// the options; the window replaces its units, key base and core.
	cfg := Config{Limit: 1, Burst: 1, Table: o.Table, Prefix: o.Prefix + quoteID(spec.ID) + ":",
		Timeout: o.Timeout, BreakAfter: o.BreakAfter, BreakFor: o.BreakFor, OnFailure: FailClosed}
	l, err := New(db, cfg)
	if err != nil {
		return nil, err
	}
	common := l.s.common
	common.OnFailure, common.FallbackShare, common.FallbackMaxKeys = Fallback, o.FallbackShare, o.FallbackMaxKeys
	if o.FallbackShare == 0 {
		common.FallbackPeers = peers
	}
	if l.core, err = remote.NewWindowCore(common, w, ErrBreakerOpen); err != nil {
		return nil, err
	}
	l.s.keyBase = fmt.Sprintf("%swindow:%v:%d:", l.s.Prefix, w.Span(), w.Slots())
	l.window = w
	return &Window{l: l}, nil
}

// Take takes n tokens from key's window at the database's time, if the
// window has room: the Decision of engine.Window.TakeAt. Errors are as
// Limiter.Take's (see Window for the store's failure).
func (w *Window) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	if w == nil {
		return engine.Decision{}, engine.ErrNilLimiter
	}
	var out [1]engine.Decision
	_, _, err := w.l.takeAll(ctx, []engine.Take{{Limiter: w.l, Key: key, N: n}}, out[:], nil)
	return out[0], err
}

// TakeAll is Limiter.TakeAll: takes may name Limiters, Quotas and Windows
// of one Store.
func (w *Window) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	if w == nil {
		return -1, engine.ErrNilLimiter
	}
	return w.l.TakeAll(ctx, takes, out)
}

// Limit is Limit over the span: the average rate the window allows.
func (w *Window) Limit() engine.Limit { return w.l.window.Limit() }

// Burst is the window's Limit: the most a key can take at once.
func (w *Window) Burst() float64 { return w.l.window.Burst() }

// Span returns the window's span.
func (w *Window) Span() time.Duration { return w.l.window.Span() }

// Slots returns how many parts the window is counted in.
func (w *Window) Slots() int { return w.l.window.Slots() }

// SetLimitTokens makes n the most a key may take in any span of the
// window from this instance's next take on, as engine.Window.SetLimitTokens
// does: what each key took stays counted (its row names neither the limit
// nor the instance). It fails, changing nothing, for a limit
// engine.NewWindow refuses. Instances that share the rows apply a change
// as each reloads.
func (w *Window) SetLimitTokens(n float64) error {
	return w.l.window.SetLimitTokens(n, ErrInvalidConfig)
}

// KeyFor returns the key of key's row in the table.
func (w *Window) KeyFor(key string) string { return w.l.KeyFor(key) }

// Stats returns the window's counters.
func (w *Window) Stats() Stats { return w.l.Stats() }

// Close stops the fallback window's sweeper.
func (w *Window) Close() error {
	if w == nil {
		return engine.ErrNilLimiter
	}
	return w.l.Close()
}

// windowRefused is the error of a window Spec on a store with leases.
func windowRefused(spec engine.Spec) error {
	return fmt.Errorf("%w: %q is a strict window, which a store with leases (StoreOptions.Lease) does not keep", ErrInvalidConfig, spec.Name)
}
