package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/faucetgo/faucet/lease"
)

// Sweep removes leased buckets whose leases all ended and that have been
// full again for its margin, with their leases, and keeps a bucket with a
// lease still held.
func TestSweepRemovesEndedLeasedBuckets(t *testing.T) {
	db := newDB(t, Schema{})
	l := leaseLimiter(t, db, 100, 10)
	ctx := context.Background()
	// Two minutes ago: a lease of 100 ms, ended long since.
	past := time.Now().Add(-2 * time.Minute).UnixMicro()
	if g, err := l.grantLease(ctx, "old", lease.Request{Want: 5000, Least: 1, TTL: 100 * time.Millisecond, ID: "a"}, &past); err != nil || g.Quanta != 5000 {
		t.Fatalf("old lease: %+v, %v", g, err)
	}
	if g, err := l.GrantLease(ctx, "live", lease.Request{Want: 5000, Least: 1, TTL: time.Hour, ID: "b"}); err != nil || g.Quanta != 5000 {
		t.Fatalf("live lease: %+v, %v", g, err)
	}
	count := func() (buckets, leases int) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM faucet_buckets_lease_buckets), (SELECT count(*) FROM faucet_buckets_leases)`).Scan(&buckets, &leases); err != nil {
			t.Fatal(err)
		}
		return buckets, leases
	}
	if b, ls := count(); b != 2 || ls != 2 {
		t.Fatalf("before the sweep: %d buckets, %d leases; want 2 and 2", b, ls)
	}
	n, err := Sweep(ctx, db, SweepOptions{})
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want the old leased bucket removed", n, err)
	}
	if b, ls := count(); b != 1 || ls != 1 {
		t.Errorf("after the sweep: %d buckets, %d leases; want the live one's only", b, ls)
	}
	if g, err := l.GrantLease(ctx, "live", lease.Request{TTL: time.Second, ID: "report"}); err != nil || g.Out != 5000 || g.Tokens != 5000 {
		t.Errorf("the live bucket after the sweep: %+v, %v; want its lease still counted", g, err)
	}
}
