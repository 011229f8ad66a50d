package runner

import (
	"errors"
	"fmt"
	"strings"

	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/jwtverify"
)

// startJWT starts the verifier the flags ask for (loading its keys) as
// opts.JWT, checks the rules against it, and warns of every rule that runs
// on unverified claims. The verifier is closed with the server.
func (s *server) startJWT(opts *httplimit.Options, rules []httplimit.Rule) error {
	if c, on := s.cfg.JWT.Config(); on {
		// jwtverify reports each distinct refresh error once.
		c.OnRefreshError = func(err error) { s.log.Warn("JWT key set not refreshed", "err", err) }
		v, err := jwtverify.New(c)
		if err != nil {
			return errors.New(strings.Join(settings.JWTProblems(err), "\n"))
		}
		opts.JWT, s.jwtVerified = v, true
		s.closers.add(loggedClose(s.log, "JWT verifier", v.Close))
	}
	if err := s.explainDelayBound(httplimit.Validate(rules, *opts)); err != nil {
		if !s.jwtVerified && usesJWT(rules) {
			// The library's message names Options.JWT; say what serve has.
			return fmt.Errorf("%s: %w\n  (verify tokens with --jwt-jwks-file, --jwt-jwks-url or %s)", s.cfg.RulesName(), err, settings.JWTSecretEnv)
		}
		return fmt.Errorf("%s: %w", s.cfg.RulesName(), err)
	}
	s.warnUnverifiedJWT(rules)
	return nil
}

func usesJWT(rules []httplimit.Rule) bool {
	for i := range rules {
		if rules[i].UsesJWT() {
			return true
		}
	}
	return false
}

// warnUnverifiedJWT logs every rule that reads claims nobody verifies.
func (s *server) warnUnverifiedJWT(rules []httplimit.Rule) {
	if s.jwtVerified {
		return
	}
	for _, r := range rules {
		if r.InsecureUnverifiedJWT && r.UsesJWT() {
			s.log.Warn("rule reads JWT claims WITHOUT verification (insecure_unverified_jwt): any client can claim any value; verify tokens with --jwt-jwks-file, --jwt-jwks-url or "+settings.JWTSecretEnv, "rule", r.Name)
		}
	}
}
