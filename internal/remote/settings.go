package remote

import (
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
)

// The defaults of Settings.
const (
	// DefaultTimeout bounds every call to the store: a round trip on the
	// same network and one script or statement take well under a
	// millisecond unless the store is in trouble.
	DefaultTimeout    = 100 * time.Millisecond
	DefaultBreakAfter = 5
	DefaultBreakFor   = time.Second
)

// Settings is what every remote store's Config has: the limit, the
// deadline of a call, the failure policy and the breaker, as the stores'
// Configs name them. A store fills it from its Config and runs the checks
// below in the order of its own fields, between its own; each check's
// error wraps Invalid (the store's ErrInvalidConfig) and names the field
// and its range, and each applies its defaults.
type Settings struct {
	// Invalid is the store's ErrInvalidConfig.
	Invalid error

	Limit           engine.Limit
	Burst           float64
	Timeout         time.Duration
	OnFailure       failpolicy.Policy
	FallbackShare   float64
	FallbackMaxKeys int
	FallbackPeers   *failpolicy.Peers
	BreakAfter      int
	BreakFor        time.Duration

	// FallbackConfig is the fallback engine's Config with OnFailure
	// Fallback, once CheckFailure has derived it.
	FallbackConfig engine.Config
}

func (s *Settings) invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{s.Invalid}, args...)...)
}

// CheckLimit checks Limit and Burst as engine.New does; the error also
// wraps engine.ErrInvalidConfig.
func (s *Settings) CheckLimit() error {
	if err := engine.CheckLimit(s.Limit, s.Burst); err != nil {
		return fmt.Errorf("%w: %w", s.Invalid, err)
	}
	return nil
}

// CheckTimeout checks Timeout and applies its default.
func (s *Settings) CheckTimeout() error {
	switch {
	case s.Timeout < 0:
		return s.invalid("Timeout must be 0 (default %v) or positive, got %v", DefaultTimeout, s.Timeout)
	case s.Timeout == 0:
		s.Timeout = DefaultTimeout
	}
	return nil
}

// CheckBreaker checks BreakFor and applies its default and BreakAfter's
// (negative BreakAfter never breaks).
func (s *Settings) CheckBreaker() error {
	switch {
	case s.BreakFor < 0:
		return s.invalid("BreakFor must be 0 (default %v) or positive, got %v", DefaultBreakFor, s.BreakFor)
	case s.BreakFor == 0:
		s.BreakFor = DefaultBreakFor
	}
	if s.BreakAfter == 0 {
		s.BreakAfter = DefaultBreakAfter
	}
	return nil
}

// CheckFailure checks OnFailure and the fallback fields (failpolicy.Check)
// and derives FallbackConfig.
func (s *Settings) CheckFailure() error {
	cfg, err := failpolicy.Check(s.OnFailure, s.Limit, s.Burst, s.FallbackShare, s.FallbackMaxKeys, s.FallbackPeers)
	if err != nil {
		return fmt.Errorf("%w: %w", s.Invalid, err)
	}
	s.FallbackConfig = cfg
	return nil
}

// Check runs checks in order and returns the first error: the first field
// that is wrong.
func Check(checks ...func() error) error {
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// ProbeSpec is a limit that every store option combines with: a Store
// checks its options once, at construction, as a Limiter's Config for it,
// rather than on the first Bind.
var ProbeSpec = engine.Spec{ID: "probe", Limit: 1e9, Burst: 1e9}
