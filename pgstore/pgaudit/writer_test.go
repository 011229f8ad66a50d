package pgaudit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgaudit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// fakeDB is a CopyFromer that keeps the rows it is given, fails while down,
// holds a COPY while hold is set, and refuses (as a foreign key would) any
// batch holding a row of rule "ghost".
type fakeDB struct {
	mu      sync.Mutex
	down    bool
	hold    chan struct{} // if set, a COPY waits until it is closed
	entered chan int      // if set, gets each COPY's size as it starts
	rules   []string      // rule_name of every row written
	sizes   []int         // of every successful COPY
	calls   int
}

var errDown = errors.New("dial tcp: connection refused")

func (f *fakeDB) CopyFrom(ctx context.Context, _ pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	var rows []string
	for src.Next() {
		v, _ := src.Values()
		rows = append(rows, v[7].(string))
	}
	f.mu.Lock()
	f.calls++
	hold, entered, down := f.hold, f.entered, f.down
	f.mu.Unlock()
	if entered != nil {
		entered <- len(rows)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if down {
		return 0, errDown
	}
	for _, r := range rows {
		if r == "ghost" {
			return 0, &pgconn.PgError{Code: "23503", Message: "violates foreign key constraint"}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, rows...)
	f.sizes = append(f.sizes, len(rows))
	return int64(len(rows)), nil
}

func (f *fakeDB) set(fn func(f *fakeDB)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeDB) written() ([]string, []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.rules...), append([]int(nil), f.sizes...)
}

func denial(rule string) httplimit.Denial {
	return httplimit.Denial{Rule: rule, Key: "k", Time: time.Unix(1_700_000_000, 0)}
}

func newWriter(t *testing.T, db pgaudit.CopyFromer, o pgaudit.Options) *pgaudit.Writer {
	t.Helper()
	w, err := pgaudit.NewWriter(db, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// balanced fails unless the Writer's counts add up.
func balanced(t *testing.T, s pgaudit.Stats) {
	t.Helper()
	if s.Recorded != s.Written+s.Dropped+s.Rejected+s.Abandoned+uint64(s.Queued) {
		t.Errorf("counts do not add up: %+v", s)
	}
}

// A full batch is written at once, a partial one when Close asks: 250
// denials at most 100 to a COPY are three COPYs.
func TestWriterBatches(t *testing.T) {
	db := &fakeDB{}
	w := newWriter(t, db, pgaudit.Options{MaxBatch: 100, FlushInterval: time.Hour})
	for range 250 {
		w.Deny(denial("r"))
	}
	waitFor(t, "two full batches written", func() bool { return w.Stats().Written == 200 })
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, sizes := db.written()
	if fmt.Sprint(sizes) != "[100 100 50]" || len(rows) != 250 {
		t.Errorf("COPY sizes %v (%d rows), want [100 100 50]", sizes, len(rows))
	}
	s := w.Stats()
	if s.Batches != 3 || s.Written != 250 || s.Queued != 0 {
		t.Errorf("stats %+v, want 3 batches, 250 written", s)
	}
	balanced(t, s)
	// A denial after Close is dropped, and counted.
	w.Deny(denial("late"))
	if s := w.Stats(); s.Dropped != 1 {
		t.Errorf("a denial after Close: dropped %d, want 1", s.Dropped)
	}
}

// While a COPY hangs, Deny still returns at once: the queue fills, and
// every denial beyond it is dropped and counted, exactly. When the
// database answers, the batch in hand and the whole queue are written.
func TestWriterNeverWaits(t *testing.T) {
	db := &fakeDB{hold: make(chan struct{}), entered: make(chan int, 10)}
	w := newWriter(t, db, pgaudit.Options{QueueSize: 100, MaxBatch: 10, FlushInterval: time.Millisecond})
	w.Deny(denial("first"))
	if n := <-db.entered; n != 1 {
		t.Fatalf("first COPY of %d rows, want 1", n)
	}
	start := time.Now()
	var slowest time.Duration
	for range 1000 {
		t0 := time.Now()
		w.Deny(denial("r"))
		slowest = max(slowest, time.Since(t0))
	}
	if took := time.Since(start); took > 2*time.Second || slowest > 500*time.Millisecond {
		t.Errorf("1000 denials with the database stuck took %v, the slowest %v", took, slowest)
	}
	s := w.Stats()
	if s.Dropped != 900 || s.Queued != 101 || s.Recorded != 1001 {
		t.Errorf("stuck: %+v, want 900 dropped, 101 queued (100 and the one in hand)", s)
	}
	db.set(func(f *fakeDB) { f.entered = nil })
	close(db.hold)
	waitFor(t, "the queue written", func() bool { return w.Stats().Queued == 0 })
	s = w.Stats()
	if s.Written != 101 {
		t.Errorf("after the database answered: %+v, want 101 written", s)
	}
	balanced(t, s)
}

// A database that is down fails each COPY; the batch is held and retried,
// the queue fills, the excess is dropped, and when the database is back
// everything held is written.
func TestWriterOutage(t *testing.T) {
	db := &fakeDB{down: true}
	w := newWriter(t, db, pgaudit.Options{QueueSize: 50, MaxBatch: 10, FlushInterval: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	w.Deny(denial("first"))
	waitFor(t, "a failed COPY", func() bool { return w.Stats().FailedBatches >= 2 })
	for range 200 {
		w.Deny(denial("r"))
	}
	if s := w.Stats(); s.Dropped != 150 || s.Queued != 51 || s.Written != 0 {
		t.Errorf("down: %+v, want 150 dropped, 51 queued", s)
	}
	db.set(func(f *fakeDB) { f.down = false })
	waitFor(t, "the queue written", func() bool { return w.Stats().Queued == 0 })
	s := w.Stats()
	rows, _ := db.written()
	if s.Written != 51 || len(rows) != 51 || rows[0] != "first" {
		t.Errorf("back: %+v, %d rows (first %q); want 51, the held batch first", s, len(rows), rows[0])
	}
	balanced(t, s)
}

// Rows the database refuses are isolated by halving the batch: only they
// are lost, counted as rejected.
func TestWriterRejectedRows(t *testing.T) {
	db := &fakeDB{}
	w := newWriter(t, db, pgaudit.Options{MaxBatch: 16, FlushInterval: time.Hour})
	for i := range 16 {
		r := "r"
		if i == 3 || i == 11 {
			r = "ghost"
		}
		w.Deny(denial(r))
	}
	waitFor(t, "the batch resolved", func() bool { return w.Stats().Queued == 0 })
	s := w.Stats()
	if s.Written != 14 || s.Rejected != 2 {
		t.Errorf("%+v, want 14 written, 2 rejected", s)
	}
	balanced(t, s)
}

// Close gives up at its context's deadline while the database is down,
// and says how many denials it abandoned.
func TestWriterCloseDeadline(t *testing.T) {
	db := &fakeDB{down: true}
	w := newWriter(t, db, pgaudit.Options{MaxBatch: 10, FlushInterval: time.Hour})
	for range 25 {
		w.Deny(denial("r"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := w.Close(ctx)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Close took %v past a 300 ms deadline", took)
	}
	s := w.Stats()
	if err == nil || s.Abandoned != 25 || s.Queued != 0 {
		t.Errorf("Close: %v, %+v; want an error and 25 abandoned", err, s)
	}
	balanced(t, s)
}

// Many goroutines denying at once, with a small queue: every denial is
// written or dropped, none twice (run with -race).
func TestWriterConcurrent(t *testing.T) {
	db := &fakeDB{}
	w := newWriter(t, db, pgaudit.Options{QueueSize: 64, MaxBatch: 16, FlushInterval: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				w.Deny(denial(fmt.Sprint(g, "-", i%3)))
			}
		})
	}
	wg.Wait()
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := w.Stats()
	rows, _ := db.written()
	if s.Recorded != 16000 || s.Written+s.Dropped != 16000 || uint64(len(rows)) != s.Written {
		t.Errorf("%+v, %d rows in the database; want 16000 recorded, all written or dropped", s, len(rows))
	}
	balanced(t, s)
}

// Deny allocates nothing, queued or dropped.
func TestDenyAllocs(t *testing.T) {
	db := &fakeDB{hold: make(chan struct{})}
	defer close(db.hold)
	w := newWriter(t, db, pgaudit.Options{QueueSize: 10})
	d := denial("r")
	if n := testing.AllocsPerRun(1000, func() { w.Deny(d) }); n != 0 {
		t.Errorf("Deny allocates %v times", n)
	}
	if s := w.Stats(); s.Dropped == 0 {
		t.Errorf("the queue of 10 never filled: %+v", s)
	}
}

// Table names are lower-case identifiers; the seed's spelling gets a hint.
func TestTableName(t *testing.T) {
	for _, bad := range []string{"", "RateLimitViolation", "a-b", "1x", "x;drop", "public.t"} {
		if _, err := pgaudit.SQL(pgaudit.Schema{Table: bad}); bad != "" && !errors.Is(err, pgaudit.ErrInvalidTable) {
			t.Errorf("table %q: %v, want ErrInvalidTable", bad, err)
		}
		if _, err := pgaudit.NewWriter(&fakeDB{}, pgaudit.Options{Table: bad}); bad != "" && err == nil {
			t.Errorf("NewWriter accepted table %q", bad)
		}
	}
	_, err := pgaudit.SQL(pgaudit.Schema{Table: "RateLimitViolation"})
	if err == nil || !contains(err.Error(), `"ratelimitviolation"`) {
		t.Errorf("the seed's spelling: %v, want a hint at ratelimitviolation", err)
	}
}

// Stats.Queued counts a denial from the moment Deny queues it until it is
// written, rejected or abandoned, with no gap while the Writer takes it from
// the queue: a caller that waits for Queued to reach 0 (as Close's callers
// and the benchmarks do) finds it written. Each round queues one denial
// and polls Stats without pausing until Queued is 0.
func TestQueuedHasNoGap(t *testing.T) {
	db := &fakeDB{}
	w := newWriter(t, db, pgaudit.Options{MaxBatch: 1, FlushInterval: time.Millisecond})
	deadline := time.Now().Add(30 * time.Second)
	for round := 1; round <= 5_000; round++ {
		w.Deny(denial("r"))
		for {
			s := w.Stats()
			if s.Queued > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("round %d: after 30 s a denial is still queued: %+v", round, s)
				}
				continue
			}
			if s.Written+s.Dropped+s.Rejected+s.Abandoned != s.Recorded {
				t.Fatalf("round %d: Queued is 0 but a denial is neither written, dropped, rejected nor abandoned: %+v", round, s)
			}
			break
		}
	}
}
