package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// ErrExceedsBurst is wrapped by the error of a WaitN for more tokens than the
// burst: no bucket ever holds them, so waiting would never end.
var ErrExceedsBurst = errors.New("engine: n exceeds the burst")

// ErrNoRoom is wrapped by the error of a WaitN on a key that has no bucket
// when MaxKeys buckets are live, none full, and OnFull is FullDeny: there is
// no bucket to wait on.
var ErrNoRoom = errors.New("engine: no room for the key's bucket (MaxKeys live, none full, OnFull FullDeny)")

// Wait is WaitN(ctx, key, 1).
func (e *Engine) Wait(ctx context.Context, key string) error {
	return e.WaitN(ctx, key, 1)
}

// WaitN blocks until n tokens are taken from key's bucket, or ctx ends. Its
// tokens are reserved at once (ReserveN), so waiters on one key are served
// in the order they called, and calls that do not wait (AllowN) cannot take
// what a waiter was promised.
//
// It returns at once, having taken nothing, with an error that wraps
// ErrExceedsBurst if n is above Burst; one naming n if n is negative or NaN;
// and one that wraps context.DeadlineExceeded if ctx's deadline comes before
// the tokens would. If ctx ends while it waits, it gives the tokens back
// (Reservation.CancelAt) and returns an error that wraps ctx.Err(): test it
// with errors.Is, not ==. A context that ends at the very instant the
// tokens are due may end the wait just after it: the tokens are then spent
// and the error returned, as in golang.org/x/time/rate. n = 0 returns nil
// at once, unless ctx has ended. A key with no room for a bucket under
// FullDeny is an error wrapping ErrNoRoom.
func (e *Engine) WaitN(ctx context.Context, key string, n float64) error {
	return e.waitN(ctx, key, n, waitClock{now: e.nanosNow, until: time.Until, sleep: sleep})
}

// waitClock is what WaitN reads the time with and waits on; tests replace
// it to run WaitN on a virtual clock.
type waitClock struct {
	now   func() int64 // nanoseconds since the engine's epoch
	until func(time.Time) time.Duration
	sleep func(context.Context, time.Duration) error
}

// sleep waits d, or until ctx ends; it returns ctx.Err() if ctx ended first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitN is WaitN on clock c.
func (e *Engine) waitN(ctx context.Context, key string, n float64, c waitClock) error {
	if ctx == nil {
		return errors.New("engine: WaitN: nil Context")
	}
	cost, ok := fixedpoint.Quantize(n)
	if !ok {
		return fmt.Errorf("engine: WaitN: n = %v, want a number of tokens ≥ 0", n)
	}
	if g := e.current(); cost > g.layout.Capacity() {
		return exceedsBurst(n, g)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("engine: WaitN: %w", err)
	}
	if cost == 0 {
		return nil
	}
	within := InfDuration
	if dl, ok := ctx.Deadline(); ok {
		within = max(0, c.until(dl))
	}
	ns := c.now()
	act, h, res := e.reserveAt(ns, BoundedKey(key), cost, within)
	switch res {
	case unpayable:
		return exceedsBurst(n, e.current()) // a change of limit lowered it meanwhile
	case noRoom:
		return fmt.Errorf("engine: WaitN: %w", ErrNoRoom)
	case beyond:
		return errors.New("engine: WaitN: the reservations queued on the key reach past the engine's range of time (146 years)")
	case late:
		return fmt.Errorf("engine: WaitN: the tokens would come in %v, after the context's deadline: %w",
			time.Duration(act-ns), context.DeadlineExceeded)
	}
	if act <= ns {
		return nil
	}
	if err := c.sleep(ctx, time.Duration(act-ns)); err != nil {
		r := Reservation{e: e, ok: true, ns: ns, act: act, h: h}
		r.cancelAt(c.now())
		return fmt.Errorf("engine: WaitN: %w", err)
	}
	return nil
}

func exceedsBurst(n float64, g *generation) error {
	return fmt.Errorf("engine: WaitN: n = %v, Burst %v: %w", n, g.burst, ErrExceedsBurst)
}
