package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/puzpuzpuz/xsync/v3"
)

// WindowConfig describes a Window. Limit and Window are required; the zero
// value of every other field picks a documented default.
type WindowConfig struct {
	// Limit is the most a key may take in any span of Window: from 0.001 to
	// 4e6 tokens, a multiple of 0.001.
	Limit float64
	// Window is the span: from 1 s to 366 days.
	Window time.Duration
	// Slots is how many parts the window is counted in: 1 to 64, 0 is 16.
	// More slots admit closer to Limit (see Window) and cost 4 bytes a key
	// each.
	Slots int
	// SweepInterval, MaxKeys and OnFull are as in Config. The sweeper
	// removes the keys whose counts have all left the window.
	SweepInterval time.Duration
	MaxKeys       int
	OnFull        FullPolicy
	// Now is the clock; nil is time.Now. TakeAllAt and SweepAt take the
	// time from the caller instead.
	Now func() time.Time
}

// Window is a strict rolling window: a key never takes more than Limit in
// any span of Window, wherever the span starts. A token bucket cannot
// promise that (of burst b and rate r it admits up to b + r*W in a span W),
// and a fixed window admits twice its limit across a boundary.
//
// The window is counted in Slots parts of Window/Slots each: a take at t is
// admitted if what the key took in the slot of t and the Slots slots before
// it, plus the cost, is at most Limit. Those slots cover the span from t
// back to at least t-Window, so no span of Window ever holds more than
// Limit; they may reach up to one slot further back, so the window
// under-admits by at most what the key took in one slot's length: a client
// at a steady rate gets at least Slots/(Slots+1) of Limit per Window
// (15/16 at the default 16 slots, about 94 %).
//
// Times are the key's own: a take with a time before the key's newest slot
// (a clock stepping back) is counted in that newest slot, and judged there,
// so the promise holds on the key's timeline whatever the clock does.
//
// Each key's counts are a small array under a per-key mutex (held for a
// few dozen nanoseconds: no allocation, no call out); the keys are in a
// concurrent map. A key costs about 100 bytes plus 4 to 5 per slot and its
// own bytes (Spec.BytesPerKey); MaxKeys bounds them.
type Window struct {
	// lim is the limit in force: SetLimitTokens replaces it.
	lim    atomic.Pointer[windowLimit]
	window time.Duration
	slotNs int64
	slots  int64 // k: the window is k slots; a take reads k+1
	keys   *xsync.MapOf[string, *windowKey]
	now    func() time.Time

	// watermark is the slot of the latest sweep that removed keys
	// (math.MinInt64: none): a new key's timeline starts there.
	watermark atomic.Int64

	live     atomic.Int64
	maxKeys  int64
	onFull   FullPolicy
	overflow atomic.Uint64
	evicted  atomic.Uint64
	spill    *windowKey

	allowed, denied counter

	sweepEvery time.Duration
	stop, done chan struct{}
	closeOnce  sync.Once
}

// windowLimit is a Window's Limit, in tokens and in quanta.
type windowLimit struct {
	tokens   float64
	capacity uint64
}

// windowKey is one key's counts: counts[i % len] is what it took in slot
// i, for the slots from newest-k to newest.
type windowKey struct {
	mu     sync.Mutex
	newest int64 // the newest slot counted; math.MinInt64: none yet
	counts []uint32
	gone   bool // removed by a sweep: look the key up again
}

var (
	_ Limiter       = (*Window)(nil)
	_ TakerAt       = (*Window)(nil)
	_ WindowRetuner = (*Window)(nil)
)

const (
	maxWindowLimit = 4e6
	maxWindowSlots = 64
	minWindow      = time.Second
	maxWindow      = 366 * 24 * time.Hour
	defaultSlots   = 16
)

// NewWindow returns a Window configured as cfg, with its sweeper running
// unless cfg.SweepInterval is negative. Every problem is reported, each
// naming the field, wrapping ErrInvalidConfig.
func NewWindow(cfg WindowConfig) (*Window, error) {
	errs := []error{CheckWindow(cfg.Limit, cfg.Window, cfg.Slots)}
	capacity, _ := fixedpoint.QuantizeExact(cfg.Limit)
	slots := cmp.Or(cfg.Slots, defaultSlots)
	shared := Config{SweepInterval: cfg.SweepInterval, MaxKeys: cfg.MaxKeys, OnFull: cfg.OnFull}
	sweep, err := shared.sweepInterval()
	errs = append(errs, err)
	maxKeys, err := shared.maxKeys()
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	w := &Window{window: cfg.Window, slots: int64(slots),
		slotNs: int64(cfg.Window) / int64(slots), keys: xsync.NewMapOf[string, *windowKey](), now: cfg.Now,
		maxKeys: maxKeys, onFull: cfg.OnFull, sweepEvery: sweep,
		allowed: newCounter(), denied: newCounter(), stop: make(chan struct{}), done: make(chan struct{})}
	if w.slotNs*w.slots < int64(cfg.Window) {
		// A window that slots do not divide is counted in slots one
		// nanosecond longer: never shorter than Window.
		w.slotNs++
	}
	if w.now == nil {
		w.now = time.Now
	}
	w.watermark.Store(math.MinInt64)
	w.lim.Store(&windowLimit{tokens: cfg.Limit, capacity: capacity})
	if w.onFull == FullShare && w.maxKeys > 0 {
		w.spill = w.newKey()
	}
	if sweep > 0 {
		go w.sweeper()
	} else {
		close(w.done)
	}
	return w, nil
}

// newKey is the state of a key new to the window: nothing taken, its
// timeline starting at the latest sweep that removed keys (see SweepAt).
func (w *Window) newKey() *windowKey {
	return &windowKey{newest: w.watermark.Load(), counts: make([]uint32, w.slots+1)}
}

// Take takes n tokens from key's window now, if the window has room.
// The error is nil unless w is nil.
func (w *Window) Take(_ context.Context, key string, n float64) (Decision, error) {
	if w == nil {
		return Decision{}, ErrNilLimiter
	}
	return w.TakeAt(w.now(), key, n), nil
}

// TakeAt takes n tokens from key's window at t. A cost above Limit is denied
// with RetryAfter InfDuration; 0 peeks. A denial takes nothing; its
// RetryAfter is when enough of what the key took leaves the window.
func (w *Window) TakeAt(t time.Time, key string, n float64) Decision {
	cost, ok := fixedpoint.Quantize(n)
	if !ok || cost > w.lim.Load().capacity {
		w.denied.add()
		return w.peek(t.UnixNano(), BoundedKey(key), fixedpoint.Never)
	}
	d, _ := w.hold(t.UnixNano(), BoundedKey(key), cost)
	if d.Allowed {
		w.allowed.add()
	} else {
		w.denied.add()
	}
	return d
}

// TakeAll is TakeAllAt at the limiters' own clocks.
func (w *Window) TakeAll(_ context.Context, takes []Take, out []Decision) (int, error) {
	return takeAll(time.Time{}, false, takes, out)
}

// TakeAllAt takes every take at t, or none, as Engine.TakeAllAt: takes may
// name Engines, Quotas and Windows.
func (w *Window) TakeAllAt(t time.Time, takes []Take, out []Decision) (int, error) {
	return takeAll(t, true, takes, out)
}

// Limit is Limit over Window: the average rate the window allows.
func (w *Window) Limit() Limit { return Limit(w.lim.Load().tokens / w.window.Seconds()) }

// Burst is the window's Limit: the most a key can take at once.
func (w *Window) Burst() float64 { return w.lim.Load().tokens }

// SetLimitTokens makes n the most a key may take in any span of Window,
// from now on; what each key took stays counted (a key above a lowered
// limit is denied until enough of it leaves the window). It fails,
// changing nothing, for a limit NewWindow refuses.
func (w *Window) SetLimitTokens(n float64) error {
	if err := checkWindowLimit(n); err != nil {
		return err
	}
	capacity, _ := fixedpoint.QuantizeExact(n)
	w.lim.Store(&windowLimit{tokens: n, capacity: capacity})
	return nil
}

// checkWindowLimit is NewWindow's check of a Limit.
func checkWindowLimit(n float64) error {
	if _, exact := fixedpoint.QuantizeExact(n); math.IsNaN(n) || n < 0.001 || n > maxWindowLimit || !exact {
		return &LimitError{Field: "Limit", Must: "be between 0.001 and 4e6 tokens, a multiple of 0.001", Got: fmt.Sprint(n)}
	}
	return nil
}

// Span returns the window's span.
func (w *Window) Span() time.Duration { return w.window }

// Slots returns how many parts the window is counted in.
func (w *Window) Slots() int { return int(w.slots) }

// Len returns the number of keys the window holds.
func (w *Window) Len() int { return int(w.live.Load()) }

// Stats returns the window's counters, as Engine.Stats.
func (w *Window) Stats() Stats {
	return Stats{Allowed: w.allowed.load(), Denied: w.denied.load(), Evicted: w.evicted.Load(), Live: w.Len(),
		Overflow: w.overflow.Load()}
}

// Close stops the sweeper. Takes after Close still work.
func (w *Window) Close() error {
	w.closeOnce.Do(func() { close(w.stop) })
	<-w.done
	return nil
}

// slotOf is the slot of the instant ns.
func (w *Window) slotOf(ns int64) int64 {
	s := ns / w.slotNs
	if ns%w.slotNs < 0 {
		s--
	}
	return s
}

// windowHeld is a take a TakeAll may give back.
type windowHeld struct {
	k    *windowKey
	slot int64
	cost uint64
}

// advance moves k's newest slot to s if s is later, clearing the slots
// that leave the window, and returns the slot a take at s counts in: s, or
// k's newest if s is earlier. The caller holds k.mu.
func (w *Window) advance(k *windowKey, s int64) int64 {
	if k.newest == math.MinInt64 || s-k.newest > w.slots {
		clear(k.counts)
		k.newest = s
		return s
	}
	if s <= k.newest {
		return k.newest
	}
	for i := k.newest + 1; i <= s; i++ {
		k.counts[w.ring(i)] = 0
	}
	k.newest = s
	return s
}

// hold takes cost quanta from key's window at ns, counting nothing, and
// returns what giving them back needs. key is bounded.
func (w *Window) hold(ns int64, key string, cost uint64) (Decision, windowHeld) {
	for {
		k, d, ok := w.keyFor(key)
		if !ok {
			return d, windowHeld{}
		}
		k.mu.Lock()
		if k.gone {
			k.mu.Unlock()
			continue
		}
		capacity := w.lim.Load().capacity
		s := w.advance(k, w.slotOf(ns))
		sum := w.sum(k)
		if sum+cost > capacity {
			d := w.denial(k, s, sum, cost, ns, capacity)
			k.mu.Unlock()
			return d, windowHeld{}
		}
		if cost > 0 {
			k.counts[w.ring(s)] += uint32(cost)
		}
		d = Decision{Allowed: true, Remaining: fixedpoint.TokensOf(capacity - sum - cost)}
		if sum+cost > 0 {
			d.ResetAfter = w.until(k, ns)
		}
		k.mu.Unlock()
		if cost == 0 {
			return d, windowHeld{}
		}
		return d, windowHeld{k: k, slot: s, cost: cost}
	}
}

// ring is the index of slot s in a key's counts.
func (w *Window) ring(s int64) int {
	n := w.slots + 1
	i := s % n
	if i < 0 {
		i += n
	}
	return int(i)
}

// sum is what k took in its window. The caller holds k.mu.
func (w *Window) sum(k *windowKey) uint64 {
	var s uint64
	for _, c := range k.counts {
		s += uint64(c)
	}
	return s
}

// denial is the Decision of a take of cost that does not fit at ns, slot s
// being k's newest: RetryAfter is when enough of the oldest slots have left
// the window (slot i leaves it when slot i+k+1 begins); InfDuration for a
// cost above Limit. The caller holds k.mu.
func (w *Window) denial(k *windowKey, s int64, sum, cost uint64, ns int64, capacity uint64) Decision {
	d := Decision{Remaining: fixedpoint.TokensOf(capacity - min(sum, capacity)), ResetAfter: w.until(k, ns)}
	if cost > capacity {
		d.RetryAfter = InfDuration
		return d
	}
	freed := uint64(0)
	for i := s - w.slots; i <= s; i++ {
		freed += uint64(k.counts[w.ring(i)])
		if sum-freed+cost <= capacity {
			d.RetryAfter = max(time.Duration((i+w.slots+1)*w.slotNs-ns), 1)
			return d
		}
	}
	d.RetryAfter = d.ResetAfter
	return d
}

// until is the wait from ns until all k took has left the window. The
// caller holds k.mu.
func (w *Window) until(k *windowKey, ns int64) time.Duration {
	for i := k.newest; i >= k.newest-w.slots; i-- {
		if k.counts[w.ring(i)] != 0 {
			return max(time.Duration((i+w.slots+1)*w.slotNs-ns), 0)
		}
	}
	return 0
}

// peek is the Decision a take of cost would get at ns, taking nothing.
func (w *Window) peek(ns int64, key string, cost uint64) Decision {
	k, ok := w.keys.Load(key)
	if !ok {
		k = w.newKey()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// A copy, on the stack: a peek moves no slot.
	var buf [maxWindowSlots + 1]uint32
	c := windowKey{newest: k.newest, counts: buf[:copy(buf[:], k.counts)]}
	capacity := w.lim.Load().capacity
	s := w.advance(&c, w.slotOf(ns))
	sum := w.sum(&c)
	if cost == fixedpoint.Never || sum+cost > capacity {
		return w.denial(&c, s, sum, cost, ns, capacity)
	}
	d := Decision{Remaining: fixedpoint.TokensOf(capacity - min(sum, capacity))}
	if sum > 0 {
		d.ResetAfter = w.until(&c, ns)
	}
	return d
}

// give returns a held take to the slot it was counted in, if that slot is
// still in the key's window, and reports the key's state at ns as a denied
// Decision of the same cost.
func (w *Window) give(h windowHeld, ns int64, key string) Decision {
	k := h.k
	k.mu.Lock()
	if !k.gone && h.slot >= k.newest-w.slots && h.slot <= k.newest {
		i := w.ring(h.slot)
		k.counts[i] -= uint32(min(uint64(k.counts[i]), h.cost))
	}
	k.mu.Unlock()
	return w.peek(ns, key, h.cost)
}

// keyFor is key's state, created (with a copy of key) if absent; with MaxKeys live, the
// overflow state (FullShare) or a capacity denial (FullDeny), counted.
func (w *Window) keyFor(key string) (*windowKey, Decision, bool) {
	if k, ok := w.keys.Load(key); ok {
		return k, Decision{}, true
	}
	if w.maxKeys > 0 {
		for {
			n := w.live.Load()
			if n >= w.maxKeys {
				w.overflow.Add(1)
				if w.spill != nil {
					return w.spill, Decision{}, true
				}
				return nil, Decision{RetryAfter: w.slotDuration()}, false
			}
			if w.live.CompareAndSwap(n, n+1) {
				break
			}
		}
	} else {
		w.live.Add(1)
	}
	// A copy: callers may hand keys in memory they reuse (httplimit does),
	// and the map keeps its keys.
	k, loaded := w.keys.LoadOrStore(strings.Clone(key), w.newKey())
	if loaded {
		w.live.Add(-1)
	}
	return k, Decision{}, true
}

func (w *Window) slotDuration() time.Duration { return time.Duration(w.slotNs) }

// SweepAt removes every key whose counts have all left the window at t,
// and returns how many.
func (w *Window) SweepAt(t time.Time) int {
	s := w.slotOf(t.UnixNano())
	// Before any key goes (see below).
	for {
		wm := w.watermark.Load()
		if s <= wm || w.watermark.CompareAndSwap(wm, s) {
			break
		}
	}
	n := 0
	w.keys.Range(func(key string, k *windowKey) bool {
		k.mu.Lock()
		idle := k.newest == math.MinInt64 || s-k.newest > w.slots
		if idle {
			k.gone = true
			w.keys.Delete(key)
			n++
		}
		k.mu.Unlock()
		return true
	})
	// A removed key's counts all lie before s-Slots. A key that comes
	// back starts its timeline at s (the watermark, raised above), so that
	// a take with an earlier time (a clock stepping back) counts at s,
	// where none of them is in its window: on the key's timeline, as when
	// it lived, no span of Window holds more than Limit.
	if n > 0 {
		w.evicted.Add(uint64(n))
		w.live.Add(-int64(n))
	}
	return n
}

func (w *Window) sweeper() {
	defer close(w.done)
	tk := time.NewTicker(w.sweepEvery)
	defer tk.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tk.C:
			w.SweepAt(w.now())
		}
	}
}

// CheckWindow returns nil if NewWindow accepts limit, window and slots, or
// what it would return: a *LimitError for each problem (Limit, Window,
// Slots), joined, each wrapping ErrInvalidConfig.
func CheckWindow(limit float64, window time.Duration, slots int) error {
	errs := []error{checkWindowLimit(limit)}
	if window < minWindow || window > maxWindow {
		errs = append(errs, &LimitError{Field: "Window", Must: "be between 1s and 366 days (8784h)", Got: window.String()})
	}
	if slots < 0 || slots > maxWindowSlots {
		errs = append(errs, &LimitError{Field: "Slots", Must: "be between 1 and 64 (0 is 16)", Got: fmt.Sprint(slots)})
	}
	return errors.Join(errs...)
}
