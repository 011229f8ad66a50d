package runner

import (
	"context"
	"log/slog"
)

// closers is what a server opened, to be closed in reverse order: on
// shutdown, or when starting fails half way. What was opened last, and may
// use what was opened before it, is closed first.
type closers struct {
	fns []func(context.Context) error
}

// add appends fn, which closes one thing; an error it returns makes the
// shutdown a failure (exit 1), and fn logs it.
func (c *closers) add(fn func(context.Context) error) {
	c.fns = append(c.fns, fn)
}

// close runs every closer, the last added first, once, and reports
// whether all of them succeeded.
func (c *closers) close(ctx context.Context) bool {
	ok := true
	for i := len(c.fns) - 1; i >= 0; i-- {
		if err := c.fns[i](ctx); err != nil {
			ok = false
		}
	}
	c.fns = nil
	return ok
}

// quietly adapts a close function that reports nothing.
func quietly(fn func()) func(context.Context) error {
	return func(context.Context) error { fn(); return nil }
}

// loggedClose adapts a close function that returns an error: the error is
// logged as what failed to close, and fails the shutdown.
func loggedClose(log *slog.Logger, what string, fn func() error) func(context.Context) error {
	return func(context.Context) error {
		err := fn()
		if err != nil {
			log.Error("shutdown: close failed", "what", what, "err", err)
		}
		return err
	}
}
