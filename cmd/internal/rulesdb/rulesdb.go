package rulesdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/pgdsn"
	"github.com/faucetgo/faucet/cmd/internal/reload"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
	"github.com/jackc/pgx/v5/pgxpool"
)

// timeout bounds connecting at start, and each read of the table.
const timeout = 10 * time.Second

// Table is the rules table, open from start to shutdown.
type Table struct {
	f       *settings.RulesDB
	pool    *pgxpool.Pool
	watcher *pgrules.Watcher
	// repeats throttles the table's repeated warnings; Close writes the
	// one it holds back.
	repeats *logthrottle.Handler
}

// Reading is a usable reading of the table: its rules, and the rows left
// out, if any.
type Reading struct {
	Rules []httplimit.Rule
	Rows  *pgrules.RowsError
}

// Open connects to the database, installs the table if asked, and reads
// the rules under opts. The rows left out are reported and the rest used,
// except with validate; code is non-zero when serve cannot start, its
// message written to stderr: 1 when the database cannot be reached or
// read, 2 when the table holds nothing usable, or a bad row under
// validate.
func Open(f *settings.RulesDB, opts httplimit.Options, validate bool, logger *slog.Logger, stderr io.Writer) (t *Table, rules []httplimit.Rule, code int) {
	t = &Table{f: f}
	fail := func(c int, format string, args ...any) (*Table, []httplimit.Rule, int) {
		fmt.Fprintf(stderr, "faucet serve: "+format+"\n", args...)
		if t.pool != nil {
			t.pool.Close()
		}
		return nil, nil, c
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	if t.pool, err = pgdsn.Open(ctx, "rules-db", f.DSN, timeout); err != nil {
		return fail(1, "%v", err)
	}
	if f.Install {
		if err := pgrules.Install(ctx, t.pool, f.Table, ""); err != nil {
			return fail(1, "--rules-db-install: %v", err)
		}
	}
	src := &pgrules.Source{DB: t.pool, Table: f.Table, Mapping: f.Mapping(), Options: opts}
	t.repeats = logthrottle.NewHandler(logger.Handler(), logthrottle.Interval)
	repeats := slog.New(t.repeats).With("component", "rules-db")
	t.watcher, err = pgrules.NewWatcher(src, pgrules.WatchOptions{Poll: f.Poll, Timeout: timeout,
		OnListenError: func(err error) {
			repeats.Warn("rules table: not listening for changes, trying again (polled every --rules-db-poll meanwhile)", "err", err)
		}})
	if err != nil {
		return fail(2, "%v", err)
	}
	rules, err = t.watcher.Read(ctx)
	var re *pgrules.ReadError
	var rows *pgrules.RowsError
	switch {
	case errors.As(err, &re) && re.Missing():
		return fail(1, "--rules-db: %v (--rules-db-install creates it)", err)
	case errors.As(err, &re):
		return fail(1, "--rules-db: %v", err)
	case rules == nil && err != nil:
		return fail(2, "--rules-db: %v", err)
	case errors.As(err, &rows) && validate:
		return fail(2, "table %s: %v", f.TableName(), err)
	case err != nil:
		logger.Warn("rules table: rows left out, the others in force", "table", f.TableName(), "problems", problemLines(rows))
	}
	return t, rules, 0
}

// Close writes the warning held back, if any, and disconnects; the
// watcher must have stopped.
func (t *Table) Close() {
	if t.repeats != nil {
		t.repeats.Flush()
	}
	if t.pool != nil {
		t.pool.Close()
	}
}

// Watch runs the watcher until ctx is done: a reading that holds no rules
// is delivered as an error, the rules in force to stay.
func (t *Table) Watch(ctx context.Context, deliver func(Reading, error)) {
	t.watcher.Run(ctx, func(rules []httplimit.Rule, err error) {
		if rules == nil {
			deliver(Reading{}, err)
			return
		}
		var rows *pgrules.RowsError
		errors.As(err, &rows)
		deliver(Reading{Rules: rules, Rows: rows}, nil)
	})
}

// Refresh makes the watcher read the table at once (for SIGHUP).
func (t *Table) Refresh() { t.watcher.Refresh() }

// Reloader applies every change of the table to lim: a change is in force
// as soon as the trigger's notification arrives, or within --rules-db-poll;
// buckets of unchanged rows are kept. A reading that holds no rules keeps
// the rules in force; a failure that lasts is logged once.
func (t *Table) Reloader(lim *httplimit.Middleware, m *metrics.Metrics, log *slog.Logger) *reload.Reloader[Reading] {
	table := t.f.TableName()
	return reload.NewWatched(t, reload.Handler[Reading]{
		Apply: func(r Reading) error { return lim.Reload(r.Rules) },
		Loaded: func(r Reading) {
			m.Reloaded(true)
			if r.Rows != nil {
				log.Warn("rules table: rows left out, the others in force", "table", table, "problems", problemLines(r.Rows))
			}
			log.Info("reloaded rules", "rules", len(r.Rules), "table", table)
		},
		Failed: func(st reload.Stage, err error) {
			m.Reloaded(false)
			if st == reload.Read {
				log.Error("rules table unusable, keeping the rules in force", "table", table, "err", err)
				return
			}
			log.Error("reload failed, keeping the rules in force", "table", table, "err", err)
		},
	})
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
