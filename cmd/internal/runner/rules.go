package runner

import (
	"errors"

	"github.com/faucetgo/faucet/cmd/internal/reload"
	"github.com/faucetgo/faucet/httplimit"
)

// rulesFile is the rules file as a source of rules.
func rulesFile(path string) reload.Source[[]httplimit.Rule] {
	return reload.FileSource[[]httplimit.Rule]{Path: path, Parse: httplimit.ParseRules}
}

// rulesFileReloader keeps the limiter's rules up to date with the rules
// file, whose content in force has digest d: on SIGHUP always, on a tick
// only if its content changed. A bad file is reported, its problems one by
// one, and the rules in force stay, with the buckets of unchanged rules.
func (s *server) rulesFileReloader(d reload.Digest) *reload.Reloader[[]httplimit.Rule] {
	path := s.cfg.Rules
	return reload.New(rulesFile(path), d, reload.Handler[[]httplimit.Rule]{
		Apply: func(rules []httplimit.Rule) error { return s.explainDelayBound(s.lim.Reload(rules)) },
		Loaded: func(rules []httplimit.Rule) {
			s.metrics.Reloaded(true)
			s.log.Info("reloaded rules", "rules", len(rules), "file", path)
			s.warnUnverifiedJWT(rules)
		},
		Failed: func(_ reload.Stage, err error) {
			s.metrics.Reloaded(false)
			attrs := []any{"file", path}
			if ce := (*httplimit.ConfigError)(nil); errors.As(err, &ce) {
				problems := make([]string, len(ce.Problems))
				for i, p := range ce.Problems {
					problems[i] = p.Error()
				}
				attrs = append(attrs, "problems", problems)
			} else {
				attrs = append(attrs, "err", err)
			}
			s.log.Error("reload failed, keeping the rules in force", attrs...)
		},
	})
}
