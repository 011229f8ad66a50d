package pgstore

import (
	"context"
	"fmt"
	"time"
)

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

// Sweep removes the rows of buckets that are full again (their expiry has
// passed: a missing row is a full bucket), walking the table once in key
// order, Batch rows per statement, so that no statement holds locks on, or
// scans, more than Batch rows. A take racing with it is safe: the DELETE
// re-checks each row's expiry under its lock. It returns the rows removed.
//
// Removed rows leave dead tuples that autovacuum makes reusable; after a
// flood of one-off keys the table stops growing rather than shrinking
// (VACUUM FULL returns the space to the system, under an exclusive lock).
func Sweep(ctx context.Context, db DB, o SweepOptions) (removed int64, err error) {
	o, err = o.resolve()
	if err != nil {
		return 0, err
	}
	t := ident(o.Table)
	sql := `WITH batch AS (
	SELECT key FROM ` + t + ` WHERE key > $1 ORDER BY key LIMIT $2
), gone AS (
	DELETE FROM ` + t + ` b USING batch WHERE b.key = batch.key
		AND b.expires <= floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint
	RETURNING 1
)
SELECT (SELECT key FROM batch ORDER BY key DESC LIMIT 1), (SELECT count(*) FROM batch), (SELECT count(*) FROM gone)`
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
			return db.QueryRow(bctx, sql, after, o.Batch).Scan(&last, &seen, &gone)
		}()
		if err != nil {
			return removed, fmt.Errorf("pgstore: sweep %s: %w", o.Table, err)
		}
		removed += gone
		if seen < int64(o.Batch) {
			return removed, nil
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
