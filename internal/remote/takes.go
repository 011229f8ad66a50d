package remote

import (
	"fmt"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
)

// CheckTakes refuses the calls of a store's TakeAll on l that are
// programming errors: a nil l (engine.ErrNilLimiter), and with errors
// prefixed by the store's name, an out shorter than takes
// (engine.ErrShortOut), a nil Limiter (engine.ErrNilLimiter), one
// that is not an *L or one that other says cannot be decided with the
// others (engine.ErrForeignTake). other returns what the take's Limiter is
// on instead ("another client"), or "" when it can be.
func CheckTakes[L any, P interface {
	*L
	engine.Limiter
}](store string, l *L, takes []engine.Take, out []engine.Decision, other func(*L) string) error {
	if l == nil {
		return engine.ErrNilLimiter
	}
	if len(out) < len(takes) {
		return fmt.Errorf("%s: %w: %d takes, %d decisions", store, engine.ErrShortOut, len(takes), len(out))
	}
	for i := range takes {
		p, ok := takes[i].Limiter.(P)
		switch tl := (*L)(p); {
		case takes[i].Limiter == nil || ok && tl == nil:
			return fmt.Errorf("%s: %w: takes[%d]", store, engine.ErrNilLimiter, i)
		case !ok:
			return fmt.Errorf("%s: %w: takes[%d] is a %T, not a %T", store, engine.ErrForeignTake, i, takes[i].Limiter, tl)
		default:
			if on := other(tl); on != "" {
				return fmt.Errorf("%s: %w: takes[%d] is a Limiter on %s", store, engine.ErrForeignTake, i, on)
			}
		}
	}
	return nil
}

// Fail fills out with the policies' answer for a call of takes that the
// store could not decide (failpolicy.Answer), counts each take in its own
// Limiter's Counters, and returns the index of the denied take (-1: all
// allowed) and whether the local engines decided the whole call. core is
// the Core of a take's Limiter.
func Fail(takes []engine.Take, out []engine.Decision, core func(*engine.Take) *Core) (denied int, fellBack bool) {
	ft := make([]failpolicy.Take, len(takes))
	for i := range takes {
		c := core(&takes[i])
		ft[i] = failpolicy.Take{Policy: c.OnFailure, Fallback: c.Fallback, Timeout: c.Timeout,
			Burst: c.Burst, Limit: c.Limit, Peers: c.FallbackPeers, Key: takes[i].Key, N: takes[i].N}
		if c.Quota != nil {
			ft[i].Burst, ft[i].Limit = c.Quota.Burst(), c.Quota.Limit()
			ft[i].Quota, ft[i].QuotaCalendar, ft[i].Share = c.FallbackQuota, c.Quota.Calendar(), c.FallbackShare
			ft[i].Calendar = takes[i].Calendar
		}
		if c.Window != nil {
			ft[i].Burst, ft[i].Limit = c.Window.Burst(), c.Window.Limit()
			ft[i].Window, ft[i].Share = c.FallbackWindow, c.FallbackShare
		}
		c.Counters.Count(c.OnFailure)
	}
	return failpolicy.Answer(ft, out)
}

// FailClosed is Fail with every take answered FailClosed, whatever its
// policy: for a call whose store answered but cannot be trusted to have
// decided (a calendar quota's store clock more than a period ahead of the
// instance's), which no local fallback may decide in its place either.
func FailClosed(takes []engine.Take, out []engine.Decision, core func(*engine.Take) *Core) int {
	for i := range takes {
		c := core(&takes[i])
		out[i] = engine.Decision{RetryAfter: c.Timeout}
		c.Counters.Count(failpolicy.FailClosed)
	}
	if len(takes) == 0 {
		return -1
	}
	return 0
}
