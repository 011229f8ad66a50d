package rls

import (
	"errors"

	"github.com/faucetgo/faucet/cmd/internal/reload"
	"github.com/faucetgo/faucet/grpclimit/envoyrls"
)

// Config is the rate-limit service's configuration as read from its
// directory.
type Config struct {
	cfg      *envoyrls.Config
	files    int
	warnings []string
}

// Domains is the number of domains configured.
func (c *Config) Domains() int { return len(c.cfg.Domains()) }

// Source is the configuration directory dir: every *.yaml file in it, one
// domain each.
func Source(dir string) reload.Source[*Config] {
	return reload.DirSource[*Config]{Dir: dir, Pattern: "*.yaml", Limit: envoyrls.MaxConfigBytes, Parse: parse}
}

// parse parses the files, reporting every problem of every file.
func parse(names []string, data [][]byte) (*Config, error) {
	out := &Config{files: len(names)}
	var domains []*envoyrls.Domain
	var errs []error
	for i, name := range names {
		d, err := envoyrls.ParseDomain(name, data[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range d.Warnings {
			out.warnings = append(out.warnings, name+": "+w)
		}
		domains = append(domains, d)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var err error
	if out.cfg, err = envoyrls.NewConfig(domains...); err != nil {
		return nil, err
	}
	return out, nil
}

// Reloader keeps the service's configuration up to date with its
// directory, whose content in force has digest d: a change to a file, or
// SIGHUP, reloads it; buckets of unchanged limits are kept. A bad
// configuration is reported with every problem, once, and the one in
// force stays.
func (r *Service) Reloader(d reload.Digest) *reload.Reloader[*Config] {
	dir := r.flags.Config
	return reload.New(Source(dir), d, reload.Handler[*Config]{
		Apply: func(c *Config) error { return r.srv.Load(c.cfg) },
		Loaded: func(c *Config) {
			r.logLoaded(c)
			r.log.Info("reloaded rate-limit configuration", "dir", dir, "files", c.files)
		},
		Failed: func(_ reload.Stage, err error) {
			r.log.Error("reload of --rls-config failed, keeping the configuration in force", "dir", dir, "err", err)
		},
	})
}
