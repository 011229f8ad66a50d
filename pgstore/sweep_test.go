package pgstore

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// flood takes a token from n distinct keys through the take function, 1000
// keys a statement, at microsecond at (one hour ago: every bucket is full
// again, its row expired, by the time the flood ends).
func flood(t *testing.T, db *pgxpool.Pool, l *Limiter, prefix string, n int, at int64) {
	t.Helper()
	const batch = 1000
	for i := 0; i < n; i += batch {
		m := min(batch, n-i)
		keys := make([][]byte, m)
		costs := make([]int64, m)
		for j := range keys {
			keys[j] = []byte(l.KeyFor(prefix + strconv.Itoa(i+j)))
			costs[j] = 1000
		}
		var now int64
		var den []bool
		var ats, qs []int64
		u := l.s.u
		if err := db.QueryRow(context.Background(), l.s.take, keys, int64(u.capacity), u.pArg, u.qArg, costs, l.s.lockMS, at).Scan(&now, &den, &ats, &qs); err != nil {
			t.Fatal(err)
		}
		for j := range den {
			if den[j] {
				t.Fatalf("flood: take %d denied", i+j)
			}
		}
	}
}

// seqScans is the table's count of sequential scans. The pool's backends
// report their statistics when they exit, so it closes them first.
func seqScans(t *testing.T, db *pgxpool.Pool, table string) int64 {
	t.Helper()
	db.Reset()
	var n int64
	for range 50 {
		var pending int
		// A backend that exits reports as it goes: wait for them to go.
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := db.QueryRow(context.Background(), `SELECT coalesce(seq_scan, 0) FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func tableStats(t *testing.T, db *pgxpool.Pool, table string) (rows, bytes int64) {
	t.Helper()
	if err := db.QueryRow(context.Background(), `SELECT count(*), pg_total_relation_size($1::regclass) FROM `+ident(table), table).Scan(&rows, &bytes); err != nil {
		t.Fatal(err)
	}
	return rows, bytes
}

// TestSweepBoundsTheTable: a flood of one-off keys leaves a row each until
// the buckets are full again; one Sweep pass removes them all, in bounded
// batches, and keeps live buckets; with VACUUM between floods (autovacuum's
// job in production) the table stops growing: floods of new keys reuse the
// space. FAUCET_PG_FLOOD sets the number of keys a flood (100,000 by
// default; docs/postgres.md shows the run with 1,000,000).
func TestSweepBoundsTheTable(t *testing.T) {
	n := 100_000
	if s := os.Getenv("FAUCET_PG_FLOOD"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1000 {
			t.Fatalf("FAUCET_PG_FLOOD=%q: want a number of keys, at least 1000", s)
		}
	}
	db := newDB(t, Schema{})
	l := mustNew(t, db, Config{Limit: 10, Burst: 5, Prefix: uniquePrefix(), Timeout: testTimeout})
	// A live bucket, refilling until long after the test: kept.
	live := mustNew(t, db, Config{Limit: frozen, Burst: 5, Prefix: uniquePrefix(), Timeout: testTimeout})
	if d, err := live.Take(context.Background(), "live", 5); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	ago := time.Now().Add(-time.Hour).UnixMicro()
	var sizes []int64
	for round := range 3 {
		scans := seqScans(t, db, DefaultTable)
		start := time.Now()
		flood(t, db, l, strconv.Itoa(round)+":", n, ago)
		floodTook := time.Since(start)
		if d := seqScans(t, db, DefaultTable) - scans; d != 0 {
			// After a sweep the statistics say the table is nearly
			// empty: a plan made then scans it all for every take.
			t.Fatalf("round %d: %d sequential scans of the table during the flood", round, d)
		}
		rows, size := tableStats(t, db, DefaultTable)
		if rows != int64(n)+1 {
			t.Fatalf("round %d: %d rows after %d one-off keys and a live one", round, rows, n)
		}
		sizes = append(sizes, size)
		start = time.Now()
		removed, err := Sweep(context.Background(), db, SweepOptions{Batch: 5000})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if rows, _ := tableStats(t, db, DefaultTable); removed != int64(n) || rows != 1 {
			t.Fatalf("round %d: sweep removed %d rows, %d left: want %d removed and the live bucket kept", round, removed, rows, n)
		}
		for range 2 { // a btree page emptied by one VACUUM is reusable after the next
			if _, err := db.Exec(context.Background(), "VACUUM "+ident(DefaultTable)); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("round %d: %d keys in %v; table and index %.1f MB (%.0f B a row); sweep %v (%.0f rows/s)", round, n,
			floodTook.Round(time.Millisecond), float64(size)/1e6, float64(size)/float64(n), took.Round(time.Millisecond), float64(removed)/took.Seconds())
	}
	if v, err := live.Tokens(context.Background(), "live"); err != nil || v > 0.5 {
		t.Fatalf("the live bucket after the sweeps: %v tokens (%v), want about 0", v, err)
	}
	if sizes[2] > sizes[1]*11/10 {
		t.Fatalf("sizes after each flood %v: the table kept growing, space not reused", sizes)
	}
}

// TestSweepBatchOption: bad batches are errors naming the field.
func TestSweepBatchOption(t *testing.T) {
	for field, o := range map[string]SweepOptions{
		"Batch":   {Batch: -1},
		"Batch ":  {Batch: 100_001},
		"Timeout": {Timeout: -time.Second},
		"Table":   {Table: "Bad-Name"},
	} {
		_, err := Sweep(context.Background(), nil, o)
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), strings.TrimSpace(field)) {
			t.Errorf("%+v: %v, want an invalid-config error naming %s", o, err, field)
		}
	}
}

// A row held locked by a transaction is skipped, not waited for: the sweep
// finishes at once and removes the others.
func TestSweepSkipsLockedRows(t *testing.T) {
	db := newDB(t, Schema{})
	l := mustNew(t, db, Config{Limit: 10, Burst: 5, Prefix: uniquePrefix()})
	flood(t, db, l, "k", 100, time.Now().Add(-time.Hour).UnixMicro())
	lockRow(t, pgtest.Shared(t).DSNOf(db.Config().ConnConfig.Database), l, "k7")
	start := time.Now()
	removed, err := Sweep(context.Background(), db, SweepOptions{Batch: 10, Timeout: testTimeout})
	if err != nil || removed != 99 {
		t.Fatalf("sweep: %d removed, %v; want the 99 rows not locked", removed, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("sweep took %v: it waited for the locked row", took)
	}
}
