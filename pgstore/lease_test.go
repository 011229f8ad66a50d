package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/engine/limitertest"
	"github.com/faucetgo/faucet/lease"
	"github.com/jackc/pgx/v5/pgxpool"
)

func leaseLimiter(t *testing.T, db *pgxpool.Pool, limit engine.Limit, burst float64) *Limiter {
	t.Helper()
	l, err := New(db, Config{Limit: limit, Burst: burst, Prefix: uniquePrefix(), Timeout: testTimeout, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// checkLeasedBucket fails unless the bucket's quanta and its leases' fit in
// the capacity: what keeps leases from minting tokens.
func checkLeasedBucket(t *testing.T, l *Limiter, what string, g lease.Grant) {
	t.Helper()
	if g.Tokens+g.Out > l.s.u.capacity {
		t.Fatalf("%s: bucket %d + leased %d quanta > capacity %d", what, g.Tokens, g.Out, l.s.u.capacity)
	}
}

// A lease takes the bucket's tokens, and the bucket refills only up to the
// capacity less what leases hold: a lease of the whole burst, held while a
// bucket alone would refill several times, leaves nothing to grant. Released,
// its unspent tokens return; a second release gives nothing. On a virtual
// clock, every figure is exact.
func TestPGLeaseRefillStopsAtCapacityLessLeased(t *testing.T) {
	l := leaseLimiter(t, newDB(t, Schema{}), 1000, 10) // full again 10 ms after empty
	ctx := context.Background()
	at := int64(1_700_000_000_000_000)
	g, err := l.grantLease(ctx, "k", lease.Request{Want: 10_000, Least: 1, TTL: time.Second, ID: "a"}, &at)
	if err != nil || g.Quanta != 10_000 || g.Out != 10_000 || g.Tokens != 0 || g.Expiry != at+1_000_000 {
		t.Fatalf("lease of the whole burst: %+v, %v", g, err)
	}
	at += 50_000
	if g, err = l.grantLease(ctx, "k", lease.Request{Want: 1000, Least: 1, TTL: time.Second, ID: "b"}, &at); err != nil || g.Quanta != 0 || g.Tokens != 0 || g.Out != 10_000 {
		t.Fatalf("a lease 50 ms later, with the burst leased: %+v, %v; want nothing granted", g, err)
	}
	// Least is a quantum, which the grid refills in 1 µs.
	if g.LastEnd != at-50_000+1_000_000 || g.Wait != 950*time.Millisecond+time.Microsecond {
		t.Errorf("nothing granted: last lease ends at %d, wait %v; want %d and the lease's end plus a quantum's refill (950.001ms)", g.LastEnd, g.Wait, at-50_000+1_000_000)
	}
	g, ok, err := l.releaseLease(ctx, "k", "a", 4000, &at)
	if err != nil || !ok || g.Out != 0 || g.Tokens != 4000 {
		t.Fatalf("release with 4 tokens unspent: %v %+v %v; want them back in the bucket", ok, g, err)
	}
	checkLeasedBucket(t, l, "after the release", g)
	if _, ok, err := l.releaseLease(ctx, "k", "a", 4000, &at); ok || err != nil {
		t.Errorf("a second release of one lease: %v, %v; want nothing", ok, err)
	}
	// The per-check bucket of the key is apart: still full.
	if d, err := l.Take(ctx, "k", 0); err != nil || d.Remaining != 10 {
		t.Errorf("the per-check bucket of a leased key: %+v, %v; want it full", d, err)
	}
	// Refilled 6 ms later, nothing leased: the row is gone (a full bucket).
	at += 6000
	g, err = l.grantLease(ctx, "k", lease.Request{TTL: time.Second, ID: "report"}, &at)
	if err != nil || g.Tokens != 10_000 || g.Out != 0 {
		t.Fatalf("report after the refill: %+v, %v; want full", g, err)
	}
	// A report writes nothing; the next call that locks the row removes it.
	if _, ok, err := l.releaseLease(ctx, "k", "none", 0, &at); ok || err != nil {
		t.Fatalf("release of a lease never granted: %v, %v", ok, err)
	}
	var rows int
	if err := l.db.QueryRow(ctx, `SELECT count(*) FROM faucet_buckets_lease_buckets`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("a full leased bucket with nothing out kept %d rows (%v), want none", rows, err)
	}
}

// An expired lease's unspent tokens are forfeited, not returned: the
// instance stopped spending them at its own deadline, which comes first.
func TestPGLeaseExpiryForfeits(t *testing.T) {
	l := leaseLimiter(t, newDB(t, Schema{}), 0.001, 10)
	ctx := context.Background()
	at := int64(1_700_000_000_000_000)
	if g, err := l.grantLease(ctx, "k", lease.Request{Want: 10_000, Least: 1, TTL: 20 * time.Millisecond, ID: "a"}, &at); err != nil || g.Quanta != 10_000 {
		t.Fatalf("lease: %+v, %v", g, err)
	}
	at += 60_000
	g, err := l.grantLease(ctx, "k", lease.Request{TTL: time.Second, ID: "report"}, &at)
	if err != nil || g.Out != 0 || g.Tokens != 0 {
		t.Fatalf("after the lease expired: %+v, %v; want nothing leased and nothing back", g, err)
	}
	if g, ok, err := l.releaseLease(ctx, "k", "a", 10_000, &at); ok || err != nil || g.Tokens != 0 {
		t.Errorf("release of an expired lease: %v %+v %v; want nothing given back", ok, g, err)
	}
	// Ending it as the previous lease of a grant gives nothing back either.
	if g, err := l.grantLease(ctx, "k", lease.Request{Want: 1, Least: 1, TTL: time.Second, ID: "b", Prev: "a", Unspent: 10_000}, &at); err != nil || g.Quanta != 0 || g.Tokens != 0 {
		t.Errorf("a grant ending the expired lease: %+v, %v; want nothing", g, err)
	}
}

// Random leases, releases and expiries from several instances on a virtual
// clock never let the bucket and the leases hold more than the capacity,
// and over any span the quanta granted less those given back are at most
// the capacity plus the grid's refill of the span, exactly.
func TestPGLeasesNeverMintTokens(t *testing.T) {
	db := newDB(t, Schema{})
	for _, tc := range []struct {
		limit engine.Limit
		burst float64
	}{{200, 20}, {5000, 50}, {0.5, 5}, {1.0 / 3, 7.5}} {
		t.Run(fmt.Sprintf("limit=%v/burst=%v", tc.limit, tc.burst), func(t *testing.T) {
			l := leaseLimiter(t, db, tc.limit, tc.burst)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(tc.burst), 7))
			type event struct{ now, net int64 }
			var events []event
			type heldLease struct {
				id     string
				quanta uint64
				expiry int64
			}
			var leases []heldLease
			capacity := l.s.u.capacity
			at := int64(1_700_000_000_000_000)
			for i := range 600 {
				switch op := rng.IntN(10); {
				case op < 6:
					r := lease.Request{Want: uint64(rng.IntN(int(capacity/4))) + 1, TTL: time.Duration(5+rng.IntN(60)) * time.Millisecond,
						ID: fmt.Sprintf("i%d-%d", rng.IntN(4), i)}
					if rng.IntN(2) == 0 {
						r.Least = r.Want
					}
					back := int64(0)
					if len(leases) > 0 && rng.IntN(3) == 0 {
						k := rng.IntN(len(leases))
						r.Prev, r.Unspent = leases[k].id, uint64(rng.IntN(int(leases[k].quanta)+1))
						// Given back only if still held: the store
						// purges a lease at its expiry.
						if leases[k].expiry > at {
							back = int64(r.Unspent)
						}
						leases = append(leases[:k], leases[k+1:]...)
					}
					g, err := l.grantLease(ctx, "k", r, &at)
					if err != nil {
						t.Fatal(err)
					}
					checkLeasedBucket(t, l, fmt.Sprintf("op %d lease", i), g)
					if g.Quanta > r.Want || g.Quanta != 0 && g.Quanta < r.Least {
						t.Fatalf("op %d: granted %d for want %d least %d", i, g.Quanta, r.Want, r.Least)
					}
					if g.Quanta > 0 {
						leases = append(leases, heldLease{r.ID, g.Quanta, g.Expiry})
					}
					if g.Quanta > 0 || back > 0 {
						events = append(events, event{g.Now, int64(g.Quanta) - back})
					}
				case op < 9 && len(leases) > 0:
					k := rng.IntN(len(leases))
					h := leases[k]
					leases = append(leases[:k], leases[k+1:]...)
					unspent := uint64(rng.IntN(int(h.quanta) + 1))
					g, ok, err := l.releaseLease(ctx, "k", h.id, unspent, &at)
					if err != nil {
						t.Fatal(err)
					}
					checkLeasedBucket(t, l, fmt.Sprintf("op %d release", i), g)
					if ok {
						events = append(events, event{g.Now, -int64(unspent)})
					}
				default:
					at += int64(rng.IntN(3000))
				}
				at += int64(rng.IntN(200))
			}
			p, q := l.s.u.p, l.s.u.q
			for i := range events {
				var net int64
				for j := i; j < len(events); j++ {
					net += events[j].net
					span := new(big.Int).Mul(big.NewInt(events[j].now-events[i].now), p)
					refill := new(big.Int).Quo(span, q).Int64() + 1
					if net > int64(capacity)+refill {
						t.Fatalf("events %d..%d (%d µs): net %d quanta granted, above capacity %d + refill %d", i, j, events[j].now-events[i].now, net, capacity, refill)
					}
				}
			}
			at += 100_000
			g, err := l.grantLease(ctx, "k", lease.Request{TTL: time.Second, ID: "report"}, &at)
			if err != nil || g.Out != 0 {
				t.Errorf("after every lease expired: %+v, %v; want nothing leased", g, err)
			}
			checkLeasedBucket(t, l, "at the end", g)
			if len(events) < 50 {
				t.Errorf("only %d grants and releases: the test exercised too little", len(events))
			}
		})
	}
}

// Check tells a schema installed before leases from a missing one, and
// Install brings it up to date.
func TestCheckReportsASchemaBeforeLeases(t *testing.T) {
	db := newDB(t, Schema{Table: "old_buckets"})
	ctx := context.Background()
	if err := Check(ctx, db, "old_buckets"); err != nil {
		t.Fatalf("a fresh install: %v", err)
	}
	for _, stmt := range []string{`DROP FUNCTION old_buckets_release`, `DROP FUNCTION old_buckets_lease`, `DROP TABLE old_buckets_leases`} {
		if _, err := db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	// Per-check limiters need none of them: an older schema keeps working.
	if err := Check(ctx, db, "old_buckets"); err != nil {
		t.Errorf("Check of a schema without the lease objects: %v, want nil", err)
	}
	err := CheckLeases(ctx, db, "old_buckets")
	if err == nil || !strings.Contains(err.Error(), "predates leases") ||
		!strings.Contains(err.Error(), "old_buckets_leases, old_buckets_lease, old_buckets_release") || !strings.Contains(err.Error(), "Install") {
		t.Fatalf("a schema without the lease objects: %v; want it named as older, with what is missing and the way out", err)
	}
	if err := Install(ctx, db, Schema{Table: "old_buckets"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckLeases(ctx, db, "old_buckets"); err != nil {
		t.Errorf("after Install again: %v", err)
	}
}

// Leased limiters on PostgreSQL pass the suite with the differences it
// states for leases.
func TestPGLeasedConformance(t *testing.T) {
	db := newDB(t, Schema{})
	limitertest.Run(t, limitertest.Harness{
		Leased: true,
		Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
			l, err := New(db, Config{Limit: limit, Burst: burst, Prefix: uniquePrefix(), Timeout: testTimeout, OnFailure: FailClosed})
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewLeased(l, lease.Options{CloseStore: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}

// Bad lease options name the field, and wrap ErrInvalidConfig.
func TestPGLeasedBadOptions(t *testing.T) {
	l, err := New(nopDB{}, Config{Limit: 1, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []lease.Options{{Lifetime: time.Millisecond}, {MaxShare: 1.5}, {MaxKeys: -1}} {
		if _, err := NewLeased(l, o); !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("NewLeased(%+v) = %v, want ErrInvalidConfig", o, err)
		}
	}
	if err := (StoreOptions{Lease: &lease.Options{MaxShare: 2}}).Check(); err == nil || !strings.Contains(err.Error(), "MaxShare") {
		t.Errorf("StoreOptions with a bad Lease: %v", err)
	}
}

// When PostgreSQL fails, a lease in hand keeps being spent without it; once
// it runs out, the Limiter's failure policy answers (FailClosed here), with
// a store error.
func TestPGLeasedOutlivesAStoreFailure(t *testing.T) {
	srv, db := ownPool(t, "leased", nil, Schema{})
	l, err := New(db, Config{Limit: 100.0 / 31536000, Burst: 100, Timeout: time.Second, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewLeased(l, lease.Options{MaxShare: 1, Lifetime: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	// Two checks: the second lease is sized from the demand, as much as
	// the bucket holds.
	for range 2 {
		if d, err := s.Take(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
	}
	held, _ := s.Take(ctx, "k", 0)
	left := int64(held.Remaining)
	if left < 10 {
		t.Fatalf("the lease holds %d tokens, want most of the burst", left)
	}
	srv.Stop()
	for i := range left {
		if d, err := s.Take(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("check %d of the %d the lease holds, with PostgreSQL down: %+v, %v", i, left, d, err)
		}
	}
	d, err := s.Take(ctx, "k", 1)
	if d.Allowed || !errors.Is(err, engine.ErrUnavailable) && !errors.Is(err, engine.ErrOutcomeUnknown) {
		t.Errorf("with the lease spent and PostgreSQL down: %+v, %v; want FailClosed's denial and a store error", d, err)
	}
	if st := l.Stats(); st.FailedClosed == 0 {
		t.Errorf("stats after the failure: %+v; want it counted as FailedClosed", st)
	}
}
