package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/faucetgo/faucet/cmd/internal/reload"
	"github.com/faucetgo/faucet/cmd/internal/rls"
	"github.com/faucetgo/faucet/cmd/internal/rulesdb"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/internal/cli"
	"github.com/faucetgo/faucet/internal/gcfloor"
)

// Run runs `faucet serve` with args and returns the exit code: 0 after a
// graceful shutdown (or --validate of valid settings), 2 for bad flags or
// rules, 1 when serve cannot start or fails.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("faucet serve", flag.ContinueOnError)
	var cfg settings.Serve
	cfg.Register(fs)
	if code, ok := cli.ParseFlags(fs, settings.Usage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "faucet serve: unexpected arguments %q\n", fs.Args())
		return 2
	}
	opts, problems := cfg.Options()
	var in inputs
	var err error
	if in.rules, in.rulesDigest, err = readRules(&cfg); err != nil {
		problems = append(problems, err.Error())
	}
	if cfg.RLS.Listen != "" && cfg.RLS.Config != "" {
		if in.rls, in.rlsDigest, err = reload.First(context.Background(), rls.Source(cfg.RLS.Config)); err != nil {
			problems = append(problems, "--rls-config: "+err.Error())
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "faucet serve: %s\n", strings.Join(problems, "\n"))
		return 2
	}
	s := newServer(&cfg, newLogger(cfg.LogFormat, stderr))
	abort := func(code int) int {
		s.closers.close(context.Background())
		return code
	}
	if cfg.Listen != "" {
		if err := s.startJWT(&opts, in.rules); err != nil {
			fmt.Fprintf(stderr, "faucet serve: %v\n", err)
			return abort(2)
		}
	}
	if cfg.RulesDB.DSN != "" {
		t, rules, code := rulesdb.Open(&cfg.RulesDB, opts, cfg.Validate, s.log, stderr)
		if code != 0 {
			return abort(code)
		}
		s.closers.add(quietly(t.Close))
		in.rules, in.table = rules, t
	}
	if cfg.Validate {
		if cfg.Listen != "" {
			fmt.Fprintf(stdout, "%s: %d rules, valid\n", cfg.RulesName(), len(in.rules))
		}
		if in.rls != nil {
			fmt.Fprintf(stdout, "%s: %d rate-limit service domains, valid\n", cfg.RLS.Config, in.rls.Domains())
		}
		return abort(0)
	}
	if err := s.build(opts, in); err != nil {
		s.log.Error("cannot start", "err", err)
		return abort(1)
	}
	gcfloor.Keep()
	return s.run()
}

// inputs is what serve read at start, before building the server: the
// HTTP rules and the rate-limit service's configuration, with the digests
// of what was read, so that the first check for a change does not parse
// them again.
type inputs struct {
	rules       []httplimit.Rule
	rulesDigest reload.Digest
	table       *rulesdb.Table // the rules' table, if --rules-db
	rls         *rls.Config
	rlsDigest   reload.Digest
}

// readRules reads the rules file, or returns the built-in rules; none
// without an HTTP listener. With --rules-db the table's rules replace the
// built-in ones once read.
func readRules(cfg *settings.Serve) ([]httplimit.Rule, reload.Digest, error) {
	if cfg.Listen == "" {
		return nil, reload.Digest{}, nil
	}
	if cfg.Rules == "" {
		return settings.DefaultRules, reload.Digest{}, nil
	}
	rules, d, err := reload.First(context.Background(), rulesFile(cfg.Rules))
	if re := (*reload.Error)(nil); errors.As(err, &re) && re.Stage == reload.Parse {
		err = fmt.Errorf("%s: %w", cfg.Rules, re.Err)
	}
	return rules, d, err
}

// newLogger writes serve's log lines to w in format "text" or "json".
func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
