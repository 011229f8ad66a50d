package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rulesDBFlags are serve's flags for rules kept in a PostgreSQL table, and
// what they open at start.
type rulesDBFlags struct {
	dsn     string
	table   string
	install bool
	userKey string
	planKey string
	poll    time.Duration

	pool    *pgxpool.Pool    // open from start to shutdown
	watcher *pgrules.Watcher // nil without --rules-db
}

// rulesDBTimeout bounds connecting at start, and each read of the table.
const rulesDBTimeout = 10 * time.Second

func (f *rulesDBFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dsn, "rules-db", "", "read the rules from a PostgreSQL table at this `DSN` instead of a file (no password in it: PGPASSWORD or a password file)")
	fs.StringVar(&f.table, "rules-db-table", pgrules.DefaultTable, "the rules' `TABLE`, or schema.table")
	fs.BoolVar(&f.install, "rules-db-install", false, "create the rules table if missing, and the trigger that notifies its changes")
	fs.StringVar(&f.userKey, "rules-db-user-key", pgrules.DefaultUserKey, "limit `KEY` of the rows of scope user: where a request's user comes from")
	fs.StringVar(&f.planKey, "rules-db-plan-key", pgrules.DefaultPlanKey, "match `KEY` a row's plan is compared with")
	fs.DurationVar(&f.poll, "rules-db-poll", time.Minute, "how often to re-read the rules table without a notification of a change")
}

func (f *rulesDBFlags) mapping() pgrules.Mapping {
	return pgrules.Mapping{UserKey: f.userKey, PlanKey: f.planKey}
}

func (f *rulesDBFlags) problems(rulesFile string) []string {
	if f.dsn == "" {
		if f.install || f.table != pgrules.DefaultTable || f.userKey != pgrules.DefaultUserKey || f.planKey != pgrules.DefaultPlanKey || f.poll != time.Minute {
			return []string{"--rules-db-table, --rules-db-install, --rules-db-user-key, --rules-db-plan-key, --rules-db-poll: only mean something with --rules-db"}
		}
		return nil
	}
	var out []string
	if rulesFile != "" {
		out = append(out, "--rules, --rules-db: give one; the rules come from a file or from a table")
	}
	if _, err := pgConfig("rules-db", f.dsn); err != nil {
		out = append(out, err.Error())
	}
	if _, err := pgrules.ParseTable(f.table); err != nil {
		out = append(out, "--rules-db-table: "+err.Error())
	}
	if err := f.mapping().Check(); err != nil {
		out = append(out, "--rules-db-user-key, --rules-db-plan-key: "+err.Error())
	}
	if f.poll <= 0 {
		out = append(out, "--rules-db-poll: must be positive")
	}
	return out
}

// tableName is the table as PostgreSQL names it, for messages.
func (f *rulesDBFlags) tableName() string {
	id, _ := pgrules.ParseTable(f.table)
	return strings.Join(id, ".")
}

// loadRulesDB connects to the database, installs the table if asked, and
// reads the rules under opts. The rows left out are reported and the rest
// used, except with --validate; code is non-zero when serve cannot start:
// 1 when the database cannot be reached or read, 2 when the table holds
// nothing usable, or a bad row under --validate.
func (cfg *serveConfig) loadRulesDB(opts httplimit.Options, logger *slog.Logger, stderr io.Writer) (rules []httplimit.Rule, code int) {
	f := &cfg.rulesDB
	fail := func(c int, format string, args ...any) ([]httplimit.Rule, int) {
		fmt.Fprintf(stderr, "faucet serve: "+format+"\n", args...)
		if f.pool != nil {
			f.pool.Close()
		}
		return nil, c
	}
	ctx, cancel := context.WithTimeout(context.Background(), rulesDBTimeout)
	defer cancel()
	var err error
	if f.pool, err = openPG(ctx, "rules-db", f.dsn, rulesDBTimeout); err != nil {
		return fail(1, "%v", err)
	}
	if f.install {
		if err := pgrules.Install(ctx, f.pool, f.table, ""); err != nil {
			return fail(1, "--rules-db-install: %v", err)
		}
	}
	src := &pgrules.Source{DB: f.pool, Table: f.table, Mapping: f.mapping(), Options: opts}
	repeats := slog.New(newThrottledHandler(logger.Handler(), repeatInterval)).With("component", "rules-db")
	f.watcher, err = pgrules.NewWatcher(src, pgrules.WatchOptions{Poll: f.poll, Timeout: rulesDBTimeout,
		OnListenError: func(err error) {
			repeats.Warn("rules table: not listening for changes, trying again (polled every --rules-db-poll meanwhile)", "err", err)
		}})
	if err != nil {
		return fail(2, "%v", err)
	}
	rules, err = f.watcher.Read(ctx)
	var re *pgrules.ReadError
	var rows *pgrules.RowsError
	switch {
	case errors.As(err, &re) && re.Missing():
		return fail(1, "--rules-db: %v (--rules-db-install creates it)", err)
	case errors.As(err, &re):
		return fail(1, "--rules-db: %v", err)
	case rules == nil && err != nil:
		return fail(2, "--rules-db: %v", err)
	case errors.As(err, &rows) && cfg.validate:
		return fail(2, "table %s: %v", f.tableName(), err)
	case err != nil:
		logger.Warn("rules table: rows left out, the others in force", "table", f.tableName(), "problems", problemLines(rows))
	}
	return rules, 0
}

func problemLines(e *pgrules.RowsError) []string {
	if e == nil {
		return nil
	}
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.Error()
	}
	return out
}

// watchRulesDB reloads the rules whenever the table changes, until the
// function it returns is called.
func (s *server) watchRulesDB() (stop func()) {
	f := &s.cfg.rulesDB
	if f.watcher == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.watcher.Run(ctx, s.reloadFromDB)
	}()
	return func() {
		cancel()
		<-done
		f.pool.Close()
	}
}

// reloadFromDB applies a reading of the table that differs from the one
// before (so a failure that lasts is logged once): the rules it holds, or,
// when it holds none, the rules in force stay.
func (s *server) reloadFromDB(rules []httplimit.Rule, err error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	table := s.cfg.rulesDB.tableName()
	if rules == nil {
		s.metrics.reloaded(false)
		s.log.Error("rules table unusable, keeping the rules in force", "table", table, "err", err)
		return
	}
	if err := s.lim.Reload(rules); err != nil {
		s.metrics.reloaded(false)
		s.log.Error("reload failed, keeping the rules in force", "table", table, "err", err)
		return
	}
	s.metrics.reloaded(true)
	if rows := (*pgrules.RowsError)(nil); errors.As(err, &rows) {
		s.log.Warn("rules table: rows left out, the others in force", "table", table, "problems", problemLines(rows))
	}
	s.log.Info("reloaded rules", "rules", len(rules), "table", table)
}
