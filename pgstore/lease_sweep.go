package pgstore

import (
	"context"
	"fmt"
)

// sweepLeases removes the leased buckets of o.Table that have been full
// again, with every lease ended, for sweepMargin, and their leases, as
// Sweep does for the per-check rows: in key order, o.Batch rows per
// statement, skipping rows a lease call holds locked. A bucket's leases go
// with it in the same statement, under its row lock, so that no leased
// quanta are forgotten while the bucket still counts them.
func sweepLeases(ctx context.Context, db DB, o SweepOptions) (removed int64, err error) {
	lb, ll := ident(o.Table+"_lease_buckets"), ident(o.Table+"_leases")
	// A schema installed before leases has nothing to sweep (Check
	// reports it).
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL`, lb, ll).Scan(&exists); err != nil || !exists {
		if err != nil {
			err = fmt.Errorf("pgstore: sweep %s_lease_buckets: %w", o.Table, err)
		}
		return 0, err
	}
	sql := render(statementText("background.sql", "sweep_leases"), Schema{Table: o.Table})
	after := []byte{}
	for {
		var seen, gone, leases int64
		var last []byte
		err := func() error {
			bctx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			return db.QueryRow(bctx, sql, after, o.Batch, sweepMargin.Microseconds()).Scan(&last, &seen, &gone, &leases)
		}()
		if err != nil {
			return removed, fmt.Errorf("pgstore: sweep %s_lease_buckets: %w", o.Table, err)
		}
		removed += gone
		if seen < int64(o.Batch) {
			return removed, nil
		}
		after = last
	}
}
