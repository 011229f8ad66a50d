package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
)

// Window is a strict rolling window whose keys live in Redis: a key never
// takes more than Limit in any span of the window, shared by every
// instance on the same server and Prefix, with the Decisions of
// engine.Window. A Store binds one for a Spec with a Window; Limiters,
// Quotas and Windows of one client decide a TakeAll together, all or
// none.
//
// The server's clock decides, as for token buckets: the script reads
// Redis TIME and counts a take in its slot (the window's span over its
// Slots, rounded up to a nanosecond, as engine.Window counts them). A
// take is admitted if what the key took in that slot and the Slots slots
// before it, plus the cost, is at most Limit. A take whose time is before
// the key's newest slot (a server clock that stepped back) counts in that
// newest slot, as in memory. A denial or a peek writes nothing, so the
// newest slot is that of the key's last take (engine.Window also moves a
// key on a denial): a take after a clock stepped back counts in that slot,
// or in its own if later. Either way no span of the key's timeline holds
// more than Limit.
//
// A denial writes nothing. RetryAfter, Remaining and ResetAfter are
// engine.Window's: the time until enough of the oldest slots leave the
// window (InfDuration for a cost above Limit), Limit less what the window
// holds, the time until all of it has left. A key is one string, its
// newest slot and the counts of the Slots+1 slots up to it, and expires
// (PXAT) when all its counts have left the window: a key whose counts all
// left and a missing key are the same. One consequence, as for token
// buckets and quotas: a server clock that steps back after a key expired
// finds no counts, and the key starts afresh.
//
// A TakeAll that a later take denies gives a window's take back to the
// slot it was counted in, if that slot is still in the key's window, as
// engine.Window does (see Limiter.TakeAll for calls over several hash
// slots).
//
// While Redis fails, a Store's Window falls back as its Limiters do
// (StoreOptions.FallbackShare): to a local engine.Window of the same span
// and slots with a share of Limit, its error wrapping engine.ErrFallback.
// Each instance's local window starts from nothing taken, so an outage may
// admit up to a Limit more per key and window across the instances, as a
// token bucket's fallback may admit up to a burst more.
//
// A Window is not batched: each Take is one script of its own.
type Window struct{ l *Limiter }

var _ engine.WindowRetuner = (*Window)(nil)

// Take takes n tokens from key's window at the server's time, if the
// window has room: the Decision of engine.Window.TakeAt. Errors are as
// Limiter.Take's (see Window for the store's failure).
func (w *Window) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	if w == nil {
		return engine.Decision{}, engine.ErrNilLimiter
	}
	var out [1]engine.Decision
	_, err := w.l.TakeAll(ctx, []engine.Take{{Limiter: w.l, Key: key, N: n}}, out[:])
	return out[0], err
}

// TakeAll is Limiter.TakeAll: takes may name Limiters, Quotas and Windows
// of one client.
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
// does: what each key took stays counted (its key names neither the
// limit nor the instance). It fails, changing nothing, for a limit
// engine.NewWindow refuses. Instances that share the keys apply a change
// as each reloads.
func (w *Window) SetLimitTokens(n float64) error {
	return w.l.window.SetLimitTokens(n, ErrInvalidConfig)
}

// KeyFor returns the Redis key of key's window.
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

// windowDecision is the Decision for a window take of cost (script units,
// as decision's) from the counts the script read, moved to slot newest
// (after the take if it was made), at the server's time now
// (microseconds).
func windowDecision(w *remote.Window, u units, cost uint64, denied bool, newest int64, counts []int64, now int64) (engine.Decision, error) {
	made := !denied && cost <= u.capacity
	d, err := w.WindowDecision(u.capacity, u.reportCost(cost), cost == u.never(), made, newest, counts, now)
	if err != nil {
		return d, fmt.Errorf("%w: %w", errReply, err)
	}
	return d, nil
}
