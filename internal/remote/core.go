package remote

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
)

// Core is what a remote store's Limiter holds besides its client: the
// checked Settings, the fallback engine (with OnFailure Fallback), the
// breaker and the counters. It is safe for concurrent use.
type Core struct {
	Settings
	// Fallback is the local engine of OnFailure Fallback, else nil.
	Fallback *engine.Engine
	// Quota is the calendar quota of a Limiter that keeps one (see
	// NewQuotaCore), and FallbackQuota its local quota of OnFailure
	// Fallback, in place of Fallback.
	Quota         *Quota
	FallbackQuota *engine.Quota
	// Window is the strict window of a Limiter that keeps one (see
	// NewWindowCore), and FallbackWindow its local window of OnFailure
	// Fallback, in place of Fallback.
	Window         *Window
	FallbackWindow *engine.Window
	Breaker        *failpolicy.Breaker
	Counters       Counters
	// breakerOpen is the store's ErrBreakerOpen.
	breakerOpen error
}

// Counters counts a Limiter's decisions and calls, and the takes the store
// failed to decide by the policy that answered them.
type Counters struct {
	failpolicy.Counters
	// Allowed and Denied count the decisions the store made.
	Allowed, Denied atomic.Uint64
	// Skipped counts the calls not made because the breaker was open;
	// Calls those made.
	Skipped, Calls atomic.Uint64
}

// NewCore returns the Core of checked settings: it builds the fallback
// engine of OnFailure Fallback and the breaker. breakerOpen is the store's
// ErrBreakerOpen, the error of the calls the open breaker answers.
func NewCore(s Settings, breakerOpen error) (*Core, error) {
	c := &Core{Settings: s, Breaker: failpolicy.NewBreaker(s.BreakAfter, s.BreakFor), breakerOpen: breakerOpen}
	if s.OnFailure == failpolicy.Fallback {
		var err error
		// CheckFailure checked the fallback's limit as engine.New checks it.
		if c.Fallback, err = engine.New(s.FallbackConfig); err != nil {
			return nil, fmt.Errorf("%w: the fallback engine: %w", s.Invalid, err)
		}
	}
	return c, nil
}

// NewQuotaCore returns the Core of a calendar quota q whose Limiter has
// settings s, checked but for the limit (a quota's is q's): with OnFailure
// Fallback, its local quota (an engine.Quota of at most FallbackMaxKeys
// keys) holds FallbackShare of q's quota, or 1/FallbackPeers.N() of it from
// each failure on, over q's calendar (failpolicy.RetuneQuota).
func NewQuotaCore(s Settings, q *Quota, breakerOpen error) (*Core, error) {
	policy, share, peers := s.OnFailure, s.FallbackShare, s.FallbackPeers
	// The core without the token buckets' fallback engine.
	s.OnFailure, s.FallbackShare, s.FallbackPeers = failpolicy.FailClosed, 0, nil
	c, err := NewCore(s, breakerOpen)
	if err != nil {
		return nil, err
	}
	c.Quota = q
	if policy != failpolicy.Fallback {
		c.OnFailure = policy
		return c, nil
	}
	if peers == nil && !(share > 0 && share <= 1) {
		return nil, fmt.Errorf("%w: FallbackShare must be in (0, 1] with OnFailure Fallback, got %v", s.Invalid, share)
	}
	start := share
	if peers != nil {
		start = 1 // the whole quota until a failure reads the peers
	}
	fq, err := engine.NewQuota(engine.QuotaConfig{Quota: failpolicy.QuotaShare(q.Burst(), start), Calendar: q.Calendar(),
		MaxKeys: failpolicy.FallbackMaxKeys(s.FallbackMaxKeys)})
	if err != nil {
		return nil, fmt.Errorf("%w: the fallback quota: %w", s.Invalid, err)
	}
	c.OnFailure, c.FallbackShare, c.FallbackPeers, c.FallbackQuota = policy, share, peers, fq
	return c, nil
}

// NewWindowCore returns the Core of a strict window w whose Limiter has
// settings s, checked but for the limit (a window's is w's): with
// OnFailure Fallback, its local window (an engine.Window of at most
// FallbackMaxKeys keys, of w's span and slots) holds FallbackShare of w's
// limit, or 1/FallbackPeers.N() of it from each failure on
// (failpolicy.RetuneWindow).
func NewWindowCore(s Settings, w *Window, breakerOpen error) (*Core, error) {
	policy, share, peers := s.OnFailure, s.FallbackShare, s.FallbackPeers
	// The core without the token buckets' fallback engine.
	s.OnFailure, s.FallbackShare, s.FallbackPeers = failpolicy.FailClosed, 0, nil
	c, err := NewCore(s, breakerOpen)
	if err != nil {
		return nil, err
	}
	c.Window = w
	if policy != failpolicy.Fallback {
		c.OnFailure = policy
		return c, nil
	}
	if peers == nil && !(share > 0 && share <= 1) {
		return nil, fmt.Errorf("%w: FallbackShare must be in (0, 1] with OnFailure Fallback, got %v", s.Invalid, share)
	}
	start := share
	if peers != nil {
		start = 1 // the whole limit until a failure reads the peers
	}
	fw, err := engine.NewWindow(engine.WindowConfig{Limit: failpolicy.QuotaShare(w.Burst(), start), Window: w.Span(),
		Slots: w.Slots(), MaxKeys: failpolicy.FallbackMaxKeys(s.FallbackMaxKeys)})
	if err != nil {
		return nil, fmt.Errorf("%w: the fallback window: %w", s.Invalid, err)
	}
	c.OnFailure, c.FallbackShare, c.FallbackPeers, c.FallbackWindow = policy, share, peers, fw
	return c, nil
}

// Close releases the fallback engine, if any. Takes after Close still
// work; the fallback engine still decides them while the store fails (it
// only stops sweeping).
func (c *Core) Close() error {
	if c.FallbackQuota != nil {
		c.FallbackQuota.Close()
	}
	if c.FallbackWindow != nil {
		c.FallbackWindow.Close()
	}
	if c.Fallback != nil {
		return c.Fallback.Close()
	}
	return nil
}

// Call makes one call to the store, do, under the Limiter's deadline
// (Timeout, unless the caller's own deadline comes first) and its breaker,
// and returns do's error. While the breaker is open it calls nothing and
// returns an Unsent error wrapping the store's ErrBreakerOpen; a context
// that has ended calls nothing either (Unsent). The breaker then observes
// the outcome (failpolicy.Breaker.Observe) unless counts, if not nil,
// reports that the error says nothing about the store.
func (c *Core) Call(ctx context.Context, do func(context.Context) error, counts func(error) bool) error {
	if c.Breaker.Open() {
		c.Counters.Skipped.Add(1)
		return Unsent{c.breakerOpen}
	}
	caller := ctx
	// A caller's own deadline that comes first already bounds the call.
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > c.Timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var err error
	if err = ctx.Err(); err != nil {
		// Not sent; a failure for the breaker only if the deadline was
		// the Limiter's (failpolicy.Breaker.Observe).
		err = Unsent{err}
	} else {
		c.Counters.Calls.Add(1)
		err = do(ctx)
	}
	if counts == nil || counts(err) {
		c.Breaker.Observe(caller, err)
	}
	return err
}

// Unsent is the error of a call that certainly did not run: the breaker
// answered, the context had ended before it was sent, or the store
// refused it before running it. Nothing was taken.
type Unsent struct{ Err error }

func (e Unsent) Error() string { return e.Err.Error() }
func (e Unsent) Unwrap() error { return e.Err }

// IsUnsent reports whether err is, or wraps, an Unsent error.
func IsUnsent(err error) bool { return errors.As(err, new(Unsent)) }

// Conn is the value that identifies a Limiter's connection, so that
// Limiters on one connection decide a TakeAll together: conn itself, or
// self when conn's type cannot be compared (nor told apart from another).
func Conn(conn, self any) any {
	if t := reflect.TypeOf(conn); t == nil || !t.Comparable() {
		return self
	}
	return conn
}
