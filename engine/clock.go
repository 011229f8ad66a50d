package engine

import "time"

// The engine counts time in nanoseconds since its epoch: the first time it is
// given, by AllowAt, TokensAt or SweepAt, or read from the clock by Allow,
// AllowN or the sweeper. Only differences between times matter, so a virtual
// clock that starts at time.Time{} works as well as time.Now(); but one Engine
// must be driven by one clock.

// epochFor returns the engine's epoch, making t the epoch if there is none.
func (e *Engine) epochFor(t time.Time) *time.Time {
	if ep := e.epoch.Load(); ep != nil {
		return ep
	}
	return e.setEpoch(t)
}

// setEpoch is kept apart so that t escapes to the heap only on the first
// call, not on every call to epochFor.
//
//go:noinline
func (e *Engine) setEpoch(t time.Time) *time.Time {
	e.epoch.CompareAndSwap(nil, &t)
	return e.epoch.Load()
}

// nanosAt returns t in nanoseconds since the epoch (saturating).
func (e *Engine) nanosAt(t time.Time) int64 {
	return int64(t.Sub(*e.epochFor(t)))
}

// nanosNow reads the monotonic clock. With an epoch from time.Now, time.Since
// reads only the monotonic clock, which wall-clock steps do not move.
//
// The clock is read on every call, not published by a goroutine every
// millisecond: that would save the read (a quarter of a call), but its lag
// varies with scheduling, so the span between two readings could exceed the
// real one and admit early, which the engine promises never to do.
func (e *Engine) nanosNow() int64 {
	ep := e.epoch.Load()
	if ep == nil {
		ep = e.epochFor(time.Now())
	}
	return int64(time.Since(*ep))
}
