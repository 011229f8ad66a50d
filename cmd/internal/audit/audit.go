package audit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/pgdsn"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgaudit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// connectTimeout bounds the check, at start, that the database answers.
const connectTimeout = 10 * time.Second

// Log is serve's audit log of denials.
type Log struct {
	pool *pgxpool.Pool
	w    *pgaudit.Writer
}

// Start connects to --audit-db, installs the table if asked, and exports
// the writer's counts to m. ruleIDs says the rules come from a table, so
// that each denial names its row. log is the throttled logger of the
// writer's errors.
func Start(f *settings.Audit, ruleIDs bool, m *metrics.Metrics, log *slog.Logger) (*Log, error) {
	ctx := context.Background()
	pool, err := pgdsn.Open(ctx, "audit-db", f.DSN, connectTimeout)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, connectTimeout)
	if f.Install {
		err = pgaudit.Install(ictx, pool, pgaudit.Schema{Table: f.Table})
	} else {
		err = pgaudit.Check(ictx, pool, f.Table)
	}
	cancel()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("--audit-db: %w", err)
	}
	o := pgaudit.Options{Table: f.Table, QueueSize: f.Queue, OnError: func(err error) {
		log.Error("audit log: writing denials failed, retrying; the queue holds them meanwhile", "err", err)
	}}
	if ruleIDs {
		o.RuleID = pgrules.RuleIDOf
	}
	w, err := pgaudit.NewWriter(pool, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	export(m, w)
	return &Log{pool: pool, w: w}, nil
}

// OnDeny is httplimit.Options.OnDeny: it queues each denial.
func (a *Log) OnDeny() func(httplimit.Denial) { return a.w.Deny }

// Close writes the denials queued until ctx ends, then disconnects.
func (a *Log) Close(ctx context.Context) error {
	err := a.w.Close(ctx)
	a.pool.Close()
	return err
}

// export exports the audit log's counts.
func export(m *metrics.Metrics, w *pgaudit.Writer) {
	counter := func(name, help string, get func(pgaudit.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(get(w.Stats())) })
	}
	m.Register(
		counter("faucet_audit_written_total", "Denials written to the --audit-db table.", func(s pgaudit.Stats) uint64 { return s.Written }),
		counter("faucet_audit_dropped_total", "Denials not recorded because --audit-queue was full (the database slow or away).", func(s pgaudit.Stats) uint64 { return s.Dropped }),
		counter("faucet_audit_rejected_total", "Denials the database refused to store (their content broke a constraint).", func(s pgaudit.Stats) uint64 { return s.Rejected }),
		counter("faucet_audit_abandoned_total", "Denials still queued when shutdown's --shutdown-timeout ran out.", func(s pgaudit.Stats) uint64 { return s.Abandoned }),
		counter("faucet_audit_failed_batches_total", "COPYs of a batch of denials that failed, each retry counted; the batch is held and retried.", func(s pgaudit.Stats) uint64 { return s.FailedBatches }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "faucet_audit_queue_length", Help: "Denials waiting to be written to the --audit-db table."},
			func() float64 { return float64(w.Stats().Queued) }),
	)
}
