package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgaudit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// auditFlags are serve's flags for the audit log of denials in PostgreSQL.
type auditFlags struct {
	dsn     string
	table   string
	queue   int
	install bool
}

const defaultAuditQueue = 10_000

// auditConnectTimeout bounds the check, at start, that the database answers.
const auditConnectTimeout = 10 * time.Second

func (f *auditFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dsn, "audit-db", "", "record every denial in PostgreSQL at this `DSN` (no password in it: set PGPASSWORD), in batches, never delaying a request")
	fs.StringVar(&f.table, "audit-table", pgaudit.DefaultTable, "`TABLE` of the audit log (a lower-case identifier)")
	fs.IntVar(&f.queue, "audit-queue", defaultAuditQueue, "most denials waiting to be written; beyond, they are dropped and counted")
	fs.BoolVar(&f.install, "audit-install", false, "create the audit table and its indexes if they do not exist (without it, they must)")
}

// problems lists what is wrong with the audit flags.
func (f *auditFlags) problems() []string {
	var problems []string
	if f.dsn == "" {
		if f.table != pgaudit.DefaultTable || f.queue != defaultAuditQueue || f.install {
			problems = append(problems, "--audit-table, --audit-queue, --audit-install: only mean something with --audit-db")
		}
		return problems
	}
	if _, err := pgConfig("audit-db", f.dsn); err != nil {
		problems = append(problems, err.Error())
	}
	if _, err := pgaudit.SQL(pgaudit.Schema{Table: f.table}); err != nil {
		problems = append(problems, "--audit-table: "+err.Error())
	}
	if f.queue < 1 {
		problems = append(problems, fmt.Sprintf("--audit-queue: must be at least 1, got %d", f.queue))
	}
	return problems
}

// audit is serve's audit log: a Writer on its own pool.
type audit struct {
	pool *pgxpool.Pool
	w    *pgaudit.Writer
}

// startAudit connects to --audit-db, installs the table if asked, and makes
// opts report denials to a Writer whose counts the metrics export; without
// --audit-db it does nothing and returns nil.
func (s *server) startAudit(opts *httplimit.Options) (*audit, error) {
	f := &s.cfg.audit
	if f.dsn == "" {
		return nil, nil
	}
	ctx := context.Background()
	pool, err := openPG(ctx, "audit-db", f.dsn, auditConnectTimeout)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, auditConnectTimeout)
	if f.install {
		err = pgaudit.Install(ictx, pool, pgaudit.Schema{Table: f.table})
	} else {
		err = pgaudit.Check(ictx, pool, f.table)
	}
	cancel()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("--audit-db: %w", err)
	}
	log := s.throttled("audit")
	o := pgaudit.Options{Table: f.table, QueueSize: f.queue, OnError: func(err error) {
		log.Error("audit log: writing denials failed, retrying; the queue holds them meanwhile", "err", err)
	}}
	if s.cfg.rulesDB.dsn != "" {
		// Rules from a table: each denial names its row.
		o.RuleID = pgrules.RuleIDOf
	}
	w, err := pgaudit.NewWriter(pool, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	opts.OnDeny = w.Deny
	s.metrics.watchAudit(w)
	return &audit{pool: pool, w: w}, nil
}

// close writes the denials queued until ctx ends, then disconnects.
func (a *audit) close(ctx context.Context) error {
	if a == nil {
		return nil
	}
	err := a.w.Close(ctx)
	a.pool.Close()
	return err
}

// watchAudit exports the audit log's counts; it is called once, before
// serving.
func (m *metrics) watchAudit(w *pgaudit.Writer) {
	counter := func(name, help string, get func(pgaudit.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(get(w.Stats())) })
	}
	m.reg.MustRegister(
		counter("faucet_audit_written_total", "Denials written to the --audit-db table.", func(s pgaudit.Stats) uint64 { return s.Written }),
		counter("faucet_audit_dropped_total", "Denials not recorded because --audit-queue was full (the database slow or away).", func(s pgaudit.Stats) uint64 { return s.Dropped }),
		counter("faucet_audit_rejected_total", "Denials the database refused to store (their content broke a constraint).", func(s pgaudit.Stats) uint64 { return s.Rejected }),
		counter("faucet_audit_abandoned_total", "Denials still queued when shutdown's --shutdown-timeout ran out.", func(s pgaudit.Stats) uint64 { return s.Abandoned }),
		counter("faucet_audit_failed_batches_total", "COPYs of a batch of denials that failed, each retry counted; the batch is held and retried.", func(s pgaudit.Stats) uint64 { return s.FailedBatches }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "faucet_audit_queue_length", Help: "Denials waiting to be written to the --audit-db table."},
			func() float64 { return float64(w.Stats().Queued) }),
	)
}
