package engine_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

func newWindow(t testing.TB, cfg engine.WindowConfig) *engine.Window {
	t.Helper()
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	w, err := engine.NewWindow(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// A window never holds more than its limit in any span, even across the
// boundary where a fixed window admits twice; a denial says when enough
// leaves the window.
func TestWindowNoDoubleAtTheEdge(t *testing.T) {
	w := newWindow(t, engine.WindowConfig{Limit: 100, Window: 24 * time.Hour, Slots: 24})
	t0 := utc("2026-11-29T23:59:00Z")
	if d := w.TakeAt(t0, "k", 100); !d.Allowed {
		t.Fatalf("first 100: %+v", d)
	}
	// Past midnight, where a daily fixed window would start afresh.
	d := w.TakeAt(t0.Add(2*time.Minute), "k", 1)
	if d.Allowed {
		t.Fatalf("past midnight: %+v, want denied: 100 in the last 24 hours", d)
	}
	// The 100 were counted in the hour slot of 23:00, which a take reads
	// with the 24 slots after it: it leaves the window when the slot after
	// those begins, midnight two days on (one slot more than 24 hours:
	// the most the window under-admits).
	if want := utc("2026-12-01T00:00:00Z").Sub(t0.Add(2 * time.Minute)); d.RetryAfter != want {
		t.Errorf("RetryAfter %v, want %v", d.RetryAfter, want)
	}
	if d := w.TakeAt(utc("2026-11-30T23:59:59Z"), "k", 1); d.Allowed {
		t.Errorf("a second before: %+v", d)
	}
	if d := w.TakeAt(utc("2026-12-01T00:00:00Z"), "k", 100); !d.Allowed {
		t.Errorf("at the retry: %+v", d)
	}
}

// A client at a steady rate gets at least Slots/(Slots+1) of the limit.
func TestWindowUnderAdmitsAtMostASlot(t *testing.T) {
	w := newWindow(t, engine.WindowConfig{Limit: 160, Window: 160 * time.Second, Slots: 16})
	t0 := utc("2026-11-29T00:00:00Z")
	admitted := 0
	// Two requests a second for 10 windows.
	for i := range 3200 {
		if w.TakeAt(t0.Add(time.Duration(i)*500*time.Millisecond), "k", 1).Allowed {
			admitted++
		}
	}
	per := float64(admitted) / 10
	if per > 160 || per < 160*16/17.0-1 {
		t.Errorf("admitted %v per window, want between %v and 160", per, 160*16/17.0)
	}
}

// Takes racing on one key never exceed the limit.
func TestWindowConcurrent(t *testing.T) {
	w := newWindow(t, engine.WindowConfig{Limit: 500, Window: time.Minute})
	at := utc("2026-11-29T12:00:00Z")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if w.TakeAt(at, "k", 1).Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 500 {
		t.Errorf("admitted %d, want exactly 500", admitted.Load())
	}
}

// All or none with a token bucket, in either order.
func TestWindowTakeAllWithAnEngine(t *testing.T) {
	w := newWindow(t, engine.WindowConfig{Limit: 3, Window: time.Hour})
	e, _ := engine.New(engine.Config{Limit: 1, Burst: 1, SweepInterval: -1})
	defer e.Close()
	at := utc("2026-11-29T12:00:00Z")
	takes := []engine.Take{{Limiter: e, Key: "k", N: 1}, {Limiter: w, Key: "k", N: 1}}
	out := make([]engine.Decision, 2)
	if k, err := w.TakeAllAt(at, takes, out); k != -1 || err != nil {
		t.Fatalf("first: %d %v", k, err)
	}
	if k, _ := w.TakeAllAt(at, takes, out); k != 0 || out[1].Remaining != 2 {
		t.Fatalf("bucket empty: %d %+v, want the bucket's denial and 2 left in the window", k, out)
	}
	if st := w.Stats(); st.Allowed != 1 || st.Denied != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestWindowAllocations(t *testing.T) {
	w := newWindow(t, engine.WindowConfig{Limit: 4e6, Window: time.Hour})
	d := newWindow(t, engine.WindowConfig{Limit: 1, Window: time.Hour})
	at := utc("2026-11-29T12:00:00Z")
	w.TakeAt(at, "k", 1)
	d.TakeAt(at, "k", 1)
	if n := testing.AllocsPerRun(100, func() { w.TakeAt(at, "k", 1) }); n != 0 {
		t.Errorf("admitted: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { d.TakeAt(at, "k", 1) }); n != 0 {
		t.Errorf("denied: %v allocations", n)
	}
}

// MaxKeys bounds the keys; a sweep removes the idle ones, and a clock
// stepping back behind the sweep counts a returning key from the sweep's
// slot.
func TestWindowKeysAndSweep(t *testing.T) {
	w := newWindow(t, engine.WindowConfig{Limit: 1, Window: time.Hour, Slots: 4, MaxKeys: 1, OnFull: engine.FullDeny})
	at := utc("2026-11-29T12:00:00Z")
	w.TakeAt(at, "a", 1)
	if d := w.TakeAt(at, "b", 1); d.Allowed || w.Stats().Overflow != 1 {
		t.Fatalf("a second key with MaxKeys 1: %+v", d)
	}
	later := at.Add(2 * time.Hour)
	if n := w.SweepAt(later); n != 1 || w.Len() != 0 {
		t.Fatalf("swept %d, %d left", n, w.Len())
	}
	// Back to 12:30: "a" returns, its timeline starting at the sweep.
	if d := w.TakeAt(at.Add(30*time.Minute), "a", 1); !d.Allowed {
		t.Fatalf("a after the sweep: %+v", d)
	}
	if d := w.TakeAt(at.Add(30*time.Minute), "a", 1); d.Allowed {
		t.Fatalf("a twice in its window: %+v", d)
	}
}

func TestWindowConfigErrors(t *testing.T) {
	_, err := engine.NewWindow(engine.WindowConfig{Limit: 5e6, Window: time.Millisecond, Slots: 65, MaxKeys: -1})
	if !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"Limit must be between 0.001 and 4e6", "Window must be between 1s and 366 days", "Slots must be between 1 and 64", "MaxKeys"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
	w := newWindow(t, engine.WindowConfig{Limit: 10, Window: time.Hour})
	if err := w.SetLimitTokens(0); err == nil || w.Burst() != 10 {
		t.Errorf("SetLimitTokens(0): %v, burst %v", err, w.Burst())
	}
}

// An engine pool opens a Window for a window Spec, shares it between
// Binds of the same span and slots (the limit retuned by the caller), and
// opens another for another span.
func TestPoolBindsWindows(t *testing.T) {
	p := engine.NewEnginePool(engine.Config{SweepInterval: -1})
	defer p.Close()
	a, err := p.Bind(engine.WindowSpec("w#1", "w", 100, 24*time.Hour, 0))
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := a.(*engine.Window); !ok || w.Span() != 24*time.Hour || a.Burst() != 100 {
		t.Fatalf("bound %T", a)
	}
	if b, _ := p.Bind(engine.WindowSpec("w#1", "w", 200, 24*time.Hour, 16)); b != a {
		t.Error("the same span and slots with another limit: not shared")
	}
	if c, _ := p.Bind(engine.WindowSpec("w#1", "w", 100, time.Hour, 0)); c == a {
		t.Error("another span: shared")
	}
	if _, err := p.Bind(engine.WindowSpec("x#1", "x", 0, time.Hour, 0)); err == nil || !strings.Contains(err.Error(), "Limit") {
		t.Errorf("a bad window: %v", err)
	}
}
