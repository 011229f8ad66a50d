package pgstore

import (
	"context"
	"testing"
)

// WarmConn peeks through both take functions, writing nothing, and fails
// where they do not exist (a pool's hook then keeps the connection).
func TestWarmConn(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, Schema{Table: "warm_buckets"})
	if err := WarmConn(ctx, db, "warm_buckets"); err != nil {
		t.Fatalf("WarmConn on an installed schema: %v", err)
	}
	var rows int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM warm_buckets`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("WarmConn wrote %d rows (%v), want none", rows, err)
	}
	if err := WarmConn(ctx, db, "missing_buckets"); err == nil {
		t.Error("WarmConn without the functions: no error")
	}
	if err := WarmConn(ctx, db, "Bad-Name"); err == nil {
		t.Error("WarmConn with a bad table name: no error")
	}
}
