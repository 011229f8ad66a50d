package pgstore

import (
	"context"
	"fmt"
	"time"
)

// sweepMargin is how long after its bucket is full again a row is kept. A
// take reads the clock once, when it starts: had Sweep removed the row of a
// bucket that was full only by Sweep's later reading, the take would find
// no row and create a full bucket at its earlier time, a refill early. The
// margin covers any take's duration, and a database clock that steps back
// by less.
const sweepMargin = time.Minute

// DefaultSweepBatch is the rows a sweep statement looks at when
// SweepOptions.Batch is 0.
const DefaultSweepBatch = 1000

// SweepOptions configures Sweep.
type SweepOptions struct {
	// Table is the bucket table; "" picks DefaultTable.
	Table string
	// Batch is the most rows one statement looks at (and so removes): 0
	// picks DefaultSweepBatch, at most 100,000.
	Batch int
	// Timeout bounds each statement; 0 picks 10 s.
	Timeout time.Duration
}

// Sweep removes the rows of buckets that have been full again for a minute
// (a missing row is a full bucket), leased buckets included (with their
// leases, once all have ended), and in-flight slots expired for as long,
// walking the table once in key order,
// Batch rows per statement, so that no statement holds locks on, or scans,
// more than Batch rows. It skips rows a take holds locked, and never waits
// for one. It returns the rows removed.
//
// Removed rows leave dead tuples that autovacuum makes reusable; after a
// flood of one-off keys the table stops growing rather than shrinking
// (VACUUM FULL returns the space to the system, under an exclusive lock).
func Sweep(ctx context.Context, db DB, o SweepOptions) (removed int64, err error) {
	o, err = o.resolve()
	if err != nil {
		return 0, err
	}
	// sql/background.sql says how a batch goes.
	sql := render(statementText("background.sql", "sweep"), Schema{Table: o.Table})
	// Keys are never empty: the empty string precedes them all. (A
	// condition such as "$1 IS NULL OR key > $1" would forgo the index's
	// range scan, and every batch would read the table from its start.)
	after := []byte{}
	for {
		var seen, gone int64
		var last []byte
		err := func() error {
			bctx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			return db.QueryRow(bctx, sql, after, o.Batch, sweepMargin.Microseconds()).Scan(&last, &seen, &gone)
		}()
		if err != nil {
			return removed, fmt.Errorf("pgstore: sweep %s: %w", o.Table, err)
		}
		removed += gone
		if seen < int64(o.Batch) {
			n, err := sweepLeases(ctx, db, o)
			if removed += n; err != nil {
				return removed, err
			}
			n, err = sweepSlots(ctx, db, o)
			return removed + n, err
		}
		after = last
	}
}

// resolve checks o and applies its defaults.
func (o SweepOptions) resolve() (SweepOptions, error) {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if err := checkTable(o.Table); err != nil {
		return o, err
	}
	switch {
	case o.Batch == 0:
		o.Batch = DefaultSweepBatch
	case o.Batch < 0 || o.Batch > 100_000:
		return o, invalid("SweepOptions.Batch must be 0 (default %d) or from 1 to 100000, got %d", DefaultSweepBatch, o.Batch)
	}
	switch {
	case o.Timeout == 0:
		o.Timeout = 10 * time.Second
	case o.Timeout < 0:
		return o, invalid("SweepOptions.Timeout must be 0 (default 10s) or positive, got %v", o.Timeout)
	}
	return o, nil
}
