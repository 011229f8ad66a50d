package engine_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// deadlineCtx is a context whose deadline is a time of a virtual clock: it
// never ends by itself.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func TestWaitNOnVirtualClock(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 2})
	c := &engine.VirtualClock{Now: at(0)}
	ctx := context.Background()
	for range 2 {
		if err := e.WaitNOn(ctx, "k", 1, c); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.Slept) != 0 {
		t.Fatalf("waited %v with tokens in the bucket", c.Slept)
	}
	// Empty: each token comes 100 ms after the one before.
	for range 3 {
		if err := e.WaitNOn(ctx, "k", 1, c); err != nil {
			t.Fatal(err)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
	if !slices.Equal(c.Slept, want) || !c.Now.Equal(at(300*time.Millisecond)) {
		t.Fatalf("waits %v, ending at %v; want %v, ending at 300ms", c.Slept, c.Now.Sub(at(0)), want)
	}
	if got := e.TokensAt(c.Now, "k"); got != 0 {
		t.Errorf("after the waits: %v tokens, want 0", got)
	}
}

func TestWaitNRefusesAtOnce(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 2})
	e.AllowAt(at(0), "k", 2)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name  string
		ctx   context.Context
		n     float64
		is    error
		words string
	}{
		{"above the burst", context.Background(), 2.5, engine.ErrExceedsBurst, "n = 2.5, Burst 2"},
		{"negative", context.Background(), -1, nil, "n = -1"},
		{"NaN", context.Background(), math.NaN(), nil, "n = NaN"},
		{"deadline before the tokens", deadlineCtx{context.Background(), at(150 * time.Millisecond)}, 2, context.DeadlineExceeded, "would come in 200ms"},
		{"context ended", cancelled, 1, context.Canceled, "context canceled"},
		{"nil context", nil, 1, nil, "nil Context"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &engine.VirtualClock{Now: at(0)}
			err := e.WaitNOn(tt.ctx, "k", tt.n, c)
			if err == nil || tt.is != nil && !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.words) {
				t.Errorf("WaitN = %v, want an error wrapping %v, saying %q", err, tt.is, tt.words)
			}
			if len(c.Slept) != 0 {
				t.Errorf("waited %v before refusing", c.Slept)
			}
		})
	}
	// Nothing was taken: 2 tokens are due at 200ms, not later.
	if err := e.WaitNOn(context.Background(), "k", 2, &engine.VirtualClock{Now: at(0)}); err != nil {
		t.Fatal(err)
	}
	if got := e.TokensAt(at(200*time.Millisecond), "k"); got != 0 {
		t.Errorf("tokens at 200ms after a wait for 2: %v, want 0", got)
	}
	if err := e.WaitNOn(context.Background(), "k", 0, &engine.VirtualClock{Now: at(0)}); err != nil {
		t.Errorf("WaitN(0) = %v, want nil", err)
	}
}

// A wait whose context ends gives its tokens back: the next waiter is
// served as if it had never waited.
func TestWaitNEndedGivesBack(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 2})
	e.AllowAt(at(0), "k", 2)
	c := &engine.VirtualClock{Now: at(0), Interrupt: context.Canceled}
	if err := e.WaitNOn(context.Background(), "k", 2, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitN ended by its context = %v, want context.Canceled", err)
	}
	if !slices.Equal(c.Slept, []time.Duration{200 * time.Millisecond}) || !c.Now.Equal(at(100*time.Millisecond)) {
		t.Fatalf("waits %v, ending at %v; want one of 200ms, ended at 100ms", c.Slept, c.Now.Sub(at(0)))
	}
	if got := e.TokensAt(at(100*time.Millisecond), "k"); got != 1 {
		t.Errorf("at 100ms after the give-back: %v tokens, want 1", got)
	}
	c = &engine.VirtualClock{Now: at(100 * time.Millisecond)}
	if err := e.WaitNOn(context.Background(), "k", 1, c); err != nil || len(c.Slept) != 0 {
		t.Errorf("next waiter: %v after waits %v, want nil at once", err, c.Slept)
	}
}

// 64 goroutines wait on one key at 1000/s on the real clock. A wait ends no
// sooner than its tokens are due, so by any time t the waits that ended are
// at most Burst + Limit × (t - start): checked at every ending. Every wait
// ends (the deadline is 100 times the time the tokens need).
func TestWaitRealClockManyWaiters(t *testing.T) {
	const limit, burst, waiters, each = 1000.0, 10.0, 64, 10
	e := newEngine(t, engine.Config{Limit: limit, Burst: burst})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Duration(waiters*each/limit*float64(time.Second)))
	defer cancel()
	start := time.Now()
	e.TokensAt(start, "") // the engine's epoch: not before start
	var mu sync.Mutex
	var ends []time.Duration
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			for range each {
				if err := e.Wait(ctx, "k"); err != nil {
					t.Error(err)
					return
				}
				end := time.Since(start)
				mu.Lock()
				ends = append(ends, end)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(ends) != waiters*each {
		t.Fatalf("%d waits ended, want %d", len(ends), waiters*each)
	}
	slices.Sort(ends)
	for i, end := range ends {
		if bound := burst + limit*end.Seconds(); float64(i+1) > bound+1e-9 {
			t.Fatalf("%d waits ended by %v, above Burst + Limit × elapsed = %v", i+1, end, bound)
		}
	}
	if s := e.Stats(); s.Allowed != waiters*each || s.Denied != 0 {
		t.Errorf("Stats = %+v, want %d allowed, none denied", s, waiters*each)
	}
}

// A key that finds the table full under FullDeny has no bucket to wait on:
// WaitN says so at once, and ReserveN is not OK.
func TestWaitNFullTableFullDeny(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 2, MaxKeys: 1, OnFull: engine.FullDeny})
	e.AllowAt(at(0), "a", 1) // the one bucket, not full
	c := &engine.VirtualClock{Now: at(0)}
	if err := e.WaitNOn(context.Background(), "b", 1, c); err == nil || !errors.Is(err, engine.ErrNoRoom) || len(c.Slept) != 0 {
		t.Errorf("WaitN on a full table = %v after waits %v, want an error saying no room, at once", err, c.Slept)
	}
	if r := e.ReserveN(at(0), "b", 1); r.OK() {
		t.Errorf("ReserveN on a full table is OK, due at %v", r.TimeToAct().Sub(at(0)))
	}
}
