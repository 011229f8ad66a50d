package runner

import (
	"errors"

	"github.com/faucetgo/faucet/httplimit"
)

// explainDelayBound adds to every problem of err with a rule's
// delay.max_delay, at start or at a reload, where its bound comes from:
// the library names a number, and the proxy derives it from two flags.
// err is returned, changed in place.
func (s *server) explainDelayBound(err error) error {
	ce := (*httplimit.ConfigError)(nil)
	if s.cfg.Upstream == "" || !errors.As(err, &ce) {
		return err
	}
	for _, p := range ce.Problems {
		if p.Field == "delay.max_delay" {
			p.Problem += " (" + s.cfg.HTTP.MaxDelayBound() + ")"
		}
	}
	return err
}
