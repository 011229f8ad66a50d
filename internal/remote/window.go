package remote

import (
	"cmp"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// Window is what a remote store's strict window keeps in the instance: its
// limit, which SetLimitTokens replaces, its span and its slots. The store
// keeps each key's counts; the store's clock picks the slot. Its Decision
// is engine.Window's, from the counts the store read. It is safe for
// concurrent use.
type Window struct {
	lim   atomic.Pointer[windowLimit]
	span  time.Duration
	slots int64
	// slotNs is the length of a slot as engine.Window counts it: the
	// span over the slots, rounded up to a whole nanosecond.
	slotNs int64
}

// windowLimit is a Window's limit, in tokens and in quanta.
type windowLimit struct {
	tokens   float64
	capacity uint64
}

// DefaultWindowSlots is the Slots of a window whose Spec leaves them 0, as
// engine.NewWindow picks them.
const DefaultWindowSlots = 16

// NewWindow returns the Window of n tokens in any span of span, counted
// in slots parts (0: DefaultWindowSlots), or the error of
// engine.CheckWindow wrapped in invalid (the store's ErrInvalidConfig).
func NewWindow(n float64, span time.Duration, slots int, invalid error) (*Window, error) {
	if err := engine.CheckWindow(n, span, slots); err != nil {
		return nil, fmt.Errorf("%w: %w", invalid, err)
	}
	k := int64(cmp.Or(slots, DefaultWindowSlots))
	w := &Window{span: span, slots: k, slotNs: int64(span) / k}
	if w.slotNs*k < int64(span) {
		w.slotNs++ // never shorter than the span, as engine.Window
	}
	capacity, _ := fixedpoint.QuantizeExact(n)
	w.lim.Store(&windowLimit{tokens: n, capacity: capacity})
	return w, nil
}

// SetLimitTokens makes n the window's limit. It fails, changing nothing,
// with engine.CheckWindow's error wrapped in invalid.
func (w *Window) SetLimitTokens(n float64, invalid error) error {
	if err := engine.CheckWindow(n, w.span, int(w.slots)); err != nil {
		return fmt.Errorf("%w: %w", invalid, err)
	}
	capacity, _ := fixedpoint.QuantizeExact(n)
	w.lim.Store(&windowLimit{tokens: n, capacity: capacity})
	return nil
}

// Limit is the limit over the span.
func (w *Window) Limit() engine.Limit { return engine.Limit(w.lim.Load().tokens / w.span.Seconds()) }

// Burst is the limit: the most a key may take in any span.
func (w *Window) Burst() float64 { return w.lim.Load().tokens }

// Capacity is the limit in quanta.
func (w *Window) Capacity() uint64 { return w.lim.Load().capacity }

// Span is the window's span, Slots how many parts it is counted in, and
// SlotNanos the length of one in nanoseconds.
func (w *Window) Span() time.Duration { return w.span }
func (w *Window) Slots() int          { return int(w.slots) }
func (w *Window) SlotNanos() int64    { return w.slotNs }

// SlotOf is the slot of the store's time now (microseconds), as
// engine.Window counts slots.
func (w *Window) SlotOf(now int64) int64 {
	ns := now * 1000
	s := ns / w.slotNs
	if ns%w.slotNs < 0 {
		s--
	}
	return s
}

// WindowDecision is the Decision of a window take of cost quanta (never:
// one that can never pass) at the store's time now (microseconds), from
// capacity and the key's counts as the store read them, moved to the slot
// of now (or left in the key's newest, for a clock that stepped back):
// newest is that slot and counts[j] what the key took in slot
// newest-Slots+j. made reports that the take was made (the counts hold
// it); otherwise it, or another take of the call, was denied, and the
// Decision is engine.Window's report of the key for cost.
func (w *Window) WindowDecision(capacity, cost uint64, never, made bool, newest int64, counts []int64, now int64) (engine.Decision, error) {
	if len(counts) != int(w.slots)+1 {
		return engine.Decision{}, fmt.Errorf("a window of %d slots read with %d counts", w.slots, len(counts))
	}
	var sum uint64
	for _, c := range counts {
		if c < 0 || c > 1<<32 {
			return engine.Decision{}, fmt.Errorf("a window slot counting %d", c)
		}
		sum += uint64(c)
	}
	ns := now * 1000
	d := engine.Decision{Remaining: fixedpoint.TokensOf(capacity - min(sum, capacity))}
	if made || !never && sum+cost <= capacity {
		d.Allowed = made
		if sum > 0 {
			d.ResetAfter = w.until(newest, counts, ns)
		}
		return d, nil
	}
	d.ResetAfter = w.until(newest, counts, ns)
	if never || cost > capacity {
		d.RetryAfter = engine.InfDuration
		return d, nil
	}
	freed := uint64(0)
	for j, c := range counts {
		freed += uint64(c)
		if sum-freed+cost <= capacity {
			i := newest - w.slots + int64(j)
			d.RetryAfter = max(time.Duration((i+w.slots+1)*w.slotNs-ns), 1)
			return d, nil
		}
	}
	d.RetryAfter = d.ResetAfter
	return d, nil
}

// until is the wait from ns until all the key took has left the window.
func (w *Window) until(newest int64, counts []int64, ns int64) time.Duration {
	for j := len(counts) - 1; j >= 0; j-- {
		if counts[j] != 0 {
			i := newest - w.slots + int64(j)
			return max(time.Duration((i+w.slots+1)*w.slotNs-ns), 0)
		}
	}
	return 0
}
