package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/engine/limitertest"
)

// TestSlotConformance runs the in-flight slot suite against a real
// PostgreSQL server: every Open is another instance, a Store on a pool of
// its own, with the same database, Table and Prefix.
func TestSlotConformance(t *testing.T) {
	db := newDB(t, Schema{Table: "slot_buckets"})
	dsn := db.Config().ConnString()
	limitertest.RunSlots(t, limitertest.SlotHarness{
		Open: func(t *testing.T) engine.SlotStore {
			s, err := NewStore(poolOn(t, dsn, Schema{Table: "slot_buckets"}), StoreOptions{Table: "slot_buckets", Prefix: "slots:",
				Timeout: testTimeout, SweepEvery: -1, Heartbeat: -1, SlotTTL: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}

// slotStore is a Store on db for slot tests, closed at cleanup.
func slotStore(t *testing.T, db DB, opts StoreOptions) *Store {
	t.Helper()
	opts.SweepEvery, opts.Heartbeat = -1, -1
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	s, err := NewStore(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A slot is a row of Table_slots under the Prefix, the quoted name and
// ":inflight:", with the database's expiry SlotTTL ahead; Release deletes
// it.
func TestSlotRows(t *testing.T) {
	db := newDB(t, Schema{})
	s := slotStore(t, db, StoreOptions{Prefix: "p:", SlotTTL: 5 * time.Second})
	sl, err := s.BindSlots("rule#1")
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	ctx := context.Background()
	if ok, _, err := sl.Acquire(ctx, "user", "h1", 1); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	var key, holder []byte
	var left float64
	err = db.QueryRow(ctx, `SELECT key, holder, (expires - floor(extract(epoch FROM clock_timestamp()) * 1000000))::float8 / 1e6 FROM faucet_buckets_slots`).
		Scan(&key, &holder, &left)
	if err != nil {
		t.Fatal(err)
	}
	if string(key) != `p:"rule#1":inflight:user` || string(holder) != "h1" {
		t.Errorf("row %q, %q; want %q, %q", key, holder, `p:"rule#1":inflight:user`, "h1")
	}
	if left <= 0 || left > 5 {
		t.Errorf("the slot expires in %v s, want up to the SlotTTL, 5 s", left)
	}
	if err := sl.Release(ctx, "user", "h1"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM faucet_buckets_slots`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows after Release (%v), want 0", n, err)
	}
}

// Sweep removes slots expired for a minute, which no acquire of their key
// passed over, and leaves the others.
func TestSlotSweep(t *testing.T) {
	db := newDB(t, Schema{})
	s := slotStore(t, db, StoreOptions{SlotTTL: 5 * time.Second})
	sl, err := s.BindSlots("sweep")
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	ctx := context.Background()
	for _, k := range []string{"dead1", "dead2", "live"} {
		if ok, _, err := sl.Acquire(ctx, k, "h", 1); !ok || err != nil {
			t.Fatalf("Acquire(%q) = %v, %v", k, ok, err)
		}
	}
	if _, err := db.Exec(ctx, `UPDATE faucet_buckets_slots SET expires = expires - 3600000000 WHERE key LIKE '%dead%'`); err != nil {
		t.Fatal(err)
	}
	n, err := Sweep(ctx, db, SweepOptions{Batch: 1})
	if err != nil || n != 2 {
		t.Errorf("Sweep = %d, %v; want the 2 dead slots", n, err)
	}
	if ok, _, err := sl.Acquire(ctx, "live", "other", 1); ok || err != nil {
		t.Errorf("Acquire of the live key = %v, %v; want denied: its slot was swept", ok, err)
	}
}

// A schema installed before slots lacks them: CheckSlots names what is
// missing, Check passes, the calls fail with errors wrapping
// engine.ErrUnavailable, and Install adds them.
func TestSlotSchemaUpgrade(t *testing.T) {
	db := newDB(t, Schema{})
	ctx := context.Background()
	if err := CheckSlots(ctx, db, ""); err != nil {
		t.Fatalf("CheckSlots after Install: %v", err)
	}
	for _, drop := range []string{"DROP TABLE faucet_buckets_slots", "DROP FUNCTION faucet_buckets_slots_acquire",
		"DROP FUNCTION faucet_buckets_slots_release", "DROP FUNCTION faucet_buckets_slots_renew"} {
		if _, err := db.Exec(ctx, drop); err != nil {
			t.Fatal(err)
		}
	}
	if err := Check(ctx, db, ""); err != nil {
		t.Errorf("Check of a schema without slots: %v", err)
	}
	err := CheckSlots(ctx, db, "")
	if err == nil || !strings.Contains(err.Error(), "faucet_buckets_slots_acquire") || !strings.Contains(err.Error(), "Install") {
		t.Errorf("CheckSlots of a schema without slots: %v, want one naming what is missing and Install", err)
	}
	// Binding refuses such a schema, as rules load: every Acquire would
	// fail.
	s := slotStore(t, db, StoreOptions{BreakAfter: -1})
	if _, err := s.BindSlots("old"); err == nil || !strings.Contains(err.Error(), "Install") {
		t.Errorf("BindSlots on a schema without slots: %v, want one saying to run Install", err)
	}
	if err := Install(ctx, db, Schema{}); err != nil {
		t.Fatal(err)
	}
	sl, err := s.BindSlots("old")
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	// The schema goes away under bound Slots: Acquire fails, naming the
	// store unavailable.
	if _, err := db.Exec(ctx, "DROP FUNCTION faucet_buckets_slots_acquire"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := sl.Acquire(ctx, "k", "h", 1); ok || !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Acquire without the schema = %v, %v; want an error wrapping engine.ErrUnavailable", ok, err)
	}
	if err := Install(ctx, db, Schema{}); err != nil {
		t.Fatal(err)
	}
	if err := CheckSlots(ctx, db, ""); err != nil {
		t.Errorf("CheckSlots after Install again: %v", err)
	}
	if ok, held, err := sl.Acquire(ctx, "k", "h", 1); !ok || held != 1 || err != nil {
		t.Errorf("Acquire after Install again = %v, %d, %v; want admitted, 1", ok, held, err)
	}
}

// A server that refuses connections fails every call with an error
// wrapping engine.ErrUnavailable.
func TestSlotStoreFails(t *testing.T) {
	srv, pool := ownPool(t, "pgstore-slots-refused", nil, Schema{})
	s := slotStore(t, pool, StoreOptions{Timeout: 2 * time.Second, BreakAfter: -1})
	sl, err := s.BindSlots("down")
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	ctx := context.Background()
	if ok, _, err := sl.Acquire(ctx, "k", "h1", 1); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	srv.Stop()
	pool.Reset()
	ok, _, err := sl.Acquire(ctx, "k", "h2", 5)
	if ok || !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Acquire with the server down = %v, %v; want an error wrapping engine.ErrUnavailable", ok, err)
	}
	if err := sl.Release(ctx, "k", "h1"); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Release with the server down: %v, want an error wrapping engine.ErrUnavailable", err)
	}
	if err := sl.Renew(ctx, []engine.SlotHold{{Key: "k", Holder: "h1"}}); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Renew with the server down: %v, want an error wrapping engine.ErrUnavailable", err)
	}
}

func TestSlotTTLIsChecked(t *testing.T) {
	for _, ttl := range []time.Duration{-time.Second, time.Millisecond, 999 * time.Millisecond, time.Hour + 1} {
		err := StoreOptions{SlotTTL: ttl}.Check()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "SlotTTL") || !strings.Contains(err.Error(), "1s to 1h0m0s") {
			t.Errorf("SlotTTL %v: %v, want an error naming SlotTTL and its range", ttl, err)
		}
	}
	db := newDB(t, Schema{})
	for ttl, want := range map[time.Duration]time.Duration{0: engine.DefaultSlotTTL, time.Second: time.Second, time.Hour: time.Hour} {
		sl, err := slotStore(t, db, StoreOptions{SlotTTL: ttl}).BindSlots("ttl")
		if err != nil {
			t.Fatal(err)
		}
		if sl.TTL() != want {
			t.Errorf("SlotTTL %v: TTL() = %v, want %v", ttl, sl.TTL(), want)
		}
		sl.Close()
	}
}

// An acquire locks the rows it changes in holder order, as a renewal
// does: an acquire by a holder whose row a renewal holds waits for it
// without holding the key's expired rows, which the renewal locks next,
// so neither deadlocks.
func TestSlotAcquireAndRenewDoNotDeadlock(t *testing.T) {
	db := newDB(t, Schema{})
	s := slotStore(t, db, StoreOptions{SlotTTL: 5 * time.Second, BreakAfter: -1})
	sl, err := s.BindSlots("order")
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, h := range []string{"a", "b"} {
		if ok, _, err := sl.Acquire(ctx, "k", h, 2); !ok || err != nil {
			t.Fatalf("Acquire(%q) = %v, %v", h, ok, err)
		}
	}
	key := []byte(sl.(*Slots).l.KeyFor("k"))
	if _, err := db.Exec(ctx, `UPDATE faucet_buckets_slots SET expires = expires - 3600000000 WHERE key = $1 AND holder = 'b'`, key); err != nil {
		t.Fatal(err)
	}
	// A renewal's transaction locks a's row, live, first.
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '10s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM faucet_buckets_slots WHERE key = $1 AND holder = 'a' FOR UPDATE`, key); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ok   bool
		held int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		ok, held, err := sl.Acquire(ctx, "k", "a", 2)
		done <- result{ok, held, err}
	}()
	// Wait until the acquire waits for a's row.
	for {
		var waiting bool
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%slots_acquire%' AND pid <> pg_backend_pid())`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("Acquire returned %v, %d, %v while a renewal held its holder's row", r.ok, r.held, r.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The renewal locks b's row next: the acquire must not hold it.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM faucet_buckets_slots WHERE key = $1 AND holder = 'b' FOR UPDATE`, key); err != nil {
		t.Fatalf("the renewal's lock of the next row: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; !r.ok || r.held != 1 || r.err != nil {
		t.Errorf("Acquire after the renewal = %v, %d, %v; want admitted, 1 held (b's slot expired)", r.ok, r.held, r.err)
	}
}
