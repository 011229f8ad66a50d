package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/jackc/pgx/v5/pgconn"
)

// The batch tests build batches deterministically: a first take's statement
// is held (watchDB.hold) while the takes of the batch queue behind it one by
// one, in a known order, and then let go.

// queued is the number of takes of key waiting for l's next statement.
func (l *Limiter) queued(key string) int {
	l.co.mu.Lock()
	defer l.co.mu.Unlock()
	if q := l.co.keys[l.KeyFor(key)]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// waitQueued waits until n takes of key are queued in l.
func waitQueued(t *testing.T, l *Limiter, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.queued(key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d takes of %q queued, want %d", l.queued(key), key, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

type takeResult struct {
	d      engine.Decision
	denied int
	now    time.Time
	err    error
}

// goTake starts a single take of key (TakeAll's, at microsecond *at of the
// store's clock unless at is nil) and returns where its result will come.
func goTake(ctx context.Context, l *Limiter, key string, n float64, at *int64) <-chan takeResult {
	c := make(chan takeResult, 1)
	go func() {
		var out [1]engine.Decision
		k, now, err := l.takeAll(ctx, []engine.Take{{Limiter: l, Key: key, N: n}}, out[:], at)
		c <- takeResult{out[0], k, now, err}
	}()
	return c
}

// batchBehind holds a first take (n[0]) in flight, queues the takes n[1:]
// behind it in order, lets the first go and returns the results in order:
// two statements, the second a batch.
func batchBehind(t *testing.T, w *watchDB, l *Limiter, key string, at *int64, n []float64) []takeResult {
	t.Helper()
	release := w.hold()
	cs := []<-chan takeResult{goTake(context.Background(), l, key, n[0], at)}
	<-w.arrived
	for i := 1; i < len(n); i++ {
		cs = append(cs, goTake(context.Background(), l, key, n[i], at))
		waitQueued(t, l, key, i)
	}
	release()
	rs := make([]takeResult, len(cs))
	for i, c := range cs {
		rs[i] = <-c
	}
	return rs
}

// TestCoalescedEquivalence: a batch decides each of its takes as the engine
// decides the same takes one after another at the same time: peeks,
// fractions, takes above the burst, negative and NaN included, on buckets
// in random states. Each batch is one statement.
func TestCoalescedEquivalence(t *testing.T) {
	w := newWatchDB(newDB(t, Schema{}))
	for i, cfg := range equivConfigs {
		t.Run(fmt.Sprintf("limit=%v,burst=%v", cfg.Limit, cfg.Burst), func(t *testing.T) {
			cfg.Prefix, cfg.Timeout = uniquePrefix(), 10*time.Second
			l := mustNew(t, w, cfg)
			now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7919 * time.Microsecond)
			e := mirror(t, cfg, now)
			token := min(time.Duration(2e9/float64(cfg.Limit)), 24*time.Hour)
			rng := rand.New(rand.NewPCG(3, uint64(i)))
			cs := costs(cfg.Burst)
			var allowed, denied int
			for round := range 12 {
				key := []string{"a", "b"}[rng.IntN(2)]
				n := make([]float64, 2+rng.IntN(10))
				for j := range n {
					n[j] = cs[rng.IntN(len(cs))]
					if rng.IntN(2) == 0 {
						n[j] = 1 // mostly takes that can pass
					}
				}
				us := now.UnixMicro()
				calls := l.Stats().Calls
				rs := batchBehind(t, w, l, key, &us, n)
				if got := l.Stats().Calls - calls; got != 2 {
					t.Fatalf("round %d: %d statements for a take and a batch behind it, want 2", round, got)
				}
				for j, r := range rs {
					want := e.AllowAt(now, key, n[j])
					if r.err != nil || r.now.UnixMicro() != us || !same(r.d, want) {
						t.Fatalf("round %d take %d of %v at %v:\nstore  %+v (at %d, %v)\nengine %+v", round, j, n, us, r.d, r.now.UnixMicro(), r.err, want)
					}
					if (r.denied == 0) != !want.Allowed || r.denied < -1 || r.denied > 0 {
						t.Fatalf("round %d take %d: TakeAll's denied index %d for %+v", round, j, r.denied, r.d)
					}
					if n[j] > 0 && n[j] <= cfg.Burst {
						if r.d.Allowed {
							allowed++
						} else {
							denied++
						}
					}
				}
				now = now.Add(time.Duration(rng.Int64N(int64(token) + 1)).Truncate(time.Microsecond))
			}
			if allowed == 0 || denied == 0 {
				t.Fatalf("batches exercised only one outcome: %d allowed, %d denied", allowed, denied)
			}
		})
	}
}

// TestCoalescedCancelWhileQueued: a caller whose context ends while its
// take waits in the queue leaves at once, without waiting for the
// statement in flight, with the failure policy's answer and an error that
// says nothing was taken; the others are decided without it.
func TestCoalescedCancelWhileQueued(t *testing.T) {
	w := newWatchDB(newDB(t, Schema{}))
	cfg := Config{Limit: frozen, Burst: 5, Prefix: uniquePrefix(), Timeout: 10 * time.Second, OnFailure: FailClosed}
	l := mustNew(t, w, cfg)
	release := w.hold()
	first := goTake(context.Background(), l, "k", 1, nil)
	<-w.arrived
	ctx, cancel := context.WithCancel(context.Background())
	gone := goTake(ctx, l, "k", 1, nil)
	waitQueued(t, l, "k", 1)
	second := goTake(context.Background(), l, "k", 1, nil)
	waitQueued(t, l, "k", 2)
	cancel()
	r := <-gone // the first statement is still held
	if !errors.Is(r.err, engine.ErrUnavailable) || !errors.Is(r.err, context.Canceled) || r.d.Allowed || r.d.RetryAfter != cfg.Timeout || r.denied != 0 {
		t.Fatalf("take cancelled while queued: %+v %v, want fail-closed, unavailable", r, r.err)
	}
	if q := l.queued("k"); q != 1 {
		t.Fatalf("%d takes queued after one left, want 1", q)
	}
	release()
	if r := <-first; r.err != nil || !r.d.Allowed || r.d.Remaining != 4 {
		t.Fatalf("first take: %+v", r)
	}
	if r := <-second; r.err != nil || !r.d.Allowed || r.d.Remaining != 3 {
		t.Fatalf("take queued with the cancelled one: %+v, want 3 left: the cancelled take took nothing", r)
	}
	if s := l.Stats(); s.Calls != 2 || s.FailedClosed != 1 || s.StoreErrors != 1 || s.Allowed != 2 {
		t.Fatalf("stats %+v: want 2 statements, 1 fail-closed answer, 2 allowed", s)
	}
}

// TestCoalescedBatchOutlivesMember: once a batch is sent, a member whose
// context ends waits for the statement, which runs on: one caller leaving
// does not fail the others' takes, and its own take is decided.
func TestCoalescedBatchOutlivesMember(t *testing.T) {
	w := newWatchDB(newDB(t, Schema{}))
	l := mustNew(t, w, Config{Limit: frozen, Burst: 5, Prefix: uniquePrefix(), Timeout: 10 * time.Second})
	release := w.hold()
	first := goTake(context.Background(), l, "k", 1, nil)
	<-w.arrived
	ctx, cancel := context.WithCancel(context.Background())
	a := goTake(ctx, l, "k", 1, nil)
	waitQueued(t, l, "k", 1)
	b := goTake(context.Background(), l, "k", 1, nil)
	waitQueued(t, l, "k", 2)
	releaseBatch := w.hold()
	release()
	<-w.arrived // the batch's statement is on its way
	cancel()
	releaseBatch()
	for i, c := range []<-chan takeResult{first, a, b} {
		if r := <-c; r.err != nil || !r.d.Allowed || r.d.Remaining != float64(4-i) {
			t.Fatalf("take %d: %+v, want allowed with %d left", i, r, 4-i)
		}
	}
}

// TestCoalescedFailure: a batch whose statement fails answers every member
// with the failure policy and a classified error, and the breaker counts
// the statement once: BreakAfter 2 stays closed after one failed batch of
// five, and opens at the second failed statement.
func TestCoalescedFailure(t *testing.T) {
	w := newWatchDB(newDB(t, Schema{}))
	cfg := Config{Limit: frozen, Burst: 5, Prefix: uniquePrefix(), Timeout: 10 * time.Second,
		OnFailure: FailClosed, BreakAfter: 2, BreakFor: time.Hour}
	l := mustNew(t, w, cfg)
	injected := &pgconn.PgError{Severity: "ERROR", Code: "XX000", Message: "injected"}
	release := w.hold()
	first := goTake(context.Background(), l, "k", 1, nil)
	<-w.arrived
	var batch []<-chan takeResult
	for i := range 5 {
		batch = append(batch, goTake(context.Background(), l, "k", 1, nil))
		waitQueued(t, l, "k", i+1)
	}
	w.failWith(injected)
	release()
	if r := <-first; r.err != nil || !r.d.Allowed {
		t.Fatalf("first take: %+v", r)
	}
	for i, c := range batch {
		r := <-c
		if !errors.Is(r.err, engine.ErrUnavailable) || !errors.Is(r.err, injected) || r.d.Allowed || r.d.RetryAfter != cfg.Timeout || r.denied != 0 {
			t.Fatalf("member %d of a failed batch: %+v, want fail-closed with the statement's error, unavailable", i, r)
		}
	}
	if s := l.Stats(); s.Calls != 2 || s.StoreErrors != 5 || s.FailedClosed != 5 || s.Skipped != 0 {
		t.Fatalf("stats %+v: want 2 statements, 5 fail-closed answers", s)
	}
	if l.core.Breaker.Open() {
		t.Fatal("the breaker opened after one failed statement: it counted the batch's members")
	}
	if _, err := l.Take(context.Background(), "k", 1); !errors.Is(err, injected) {
		t.Fatalf("second failing statement: %v", err)
	}
	if _, err := l.Take(context.Background(), "k", 1); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("after two failed statements: %v, want the breaker's answer", err)
	}
}

// TestCoalescedBatchCap: takes queued beyond maxBatch wait for the next
// statement; every take is decided once.
func TestCoalescedBatchCap(t *testing.T) {
	w := newWatchDB(newDB(t, Schema{}))
	l := mustNew(t, w, Config{Limit: frozen, Burst: 2000, Prefix: uniquePrefix(), Timeout: 30 * time.Second})
	const queued = maxBatch + 100
	release := w.hold()
	first := goTake(context.Background(), l, "k", 1, nil)
	<-w.arrived
	var cs []<-chan takeResult
	for range queued {
		cs = append(cs, goTake(context.Background(), l, "k", 1, nil))
	}
	waitQueued(t, l, "k", queued)
	release()
	seen := map[float64]bool{}
	for _, c := range append(cs, first) {
		r := <-c
		if r.err != nil || !r.d.Allowed || seen[r.d.Remaining] {
			t.Fatalf("%+v: want every take allowed, each leaving a different number of tokens", r)
		}
		seen[r.d.Remaining] = true
	}
	if s := l.Stats(); s.Calls != 3 || s.Allowed != queued+1 {
		t.Fatalf("stats %+v: want 3 statements (a take, a full batch, the rest)", s)
	}
	if m := w.mostInFlight(); m != 1 {
		t.Fatalf("%d statements in flight at once, want 1", m)
	}
}

// TestTakeRunWritesOnce: the take function decides a run of takes of one
// key from one read of its row and writes it once (a trigger counts the
// row versions), not once per take, with each take's own reply.
func TestTakeRunWritesOnce(t *testing.T) {
	db := newDB(t, Schema{})
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE TABLE writes (n bigint NOT NULL)`,
		`INSERT INTO writes VALUES (0)`,
		`CREATE FUNCTION count_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE writes SET n = n + 1; RETURN NULL; END $$`,
		`CREATE TRIGGER count_write AFTER INSERT OR UPDATE ON ` + DefaultTable + ` FOR EACH ROW EXECUTE FUNCTION count_write()`,
	} {
		if _, err := db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	l := mustNew(t, db, Config{Limit: frozen, Burst: 10, Prefix: uniquePrefix(), Timeout: testTimeout})
	u := l.s.u
	n := []float64{1, 0, 2.5, 11, 1, 0.5, 7, 1}
	type reply struct {
		denied bool
		q      int64
	}
	// The first run starts from a full bucket, the second from 4 tokens.
	rounds := [][]reply{
		{{false, 9000}, {false, 9000}, {false, 6500}, {true, 6500}, {false, 5500}, {false, 5000}, {true, 5000}, {false, 4000}},
		{{false, 3000}, {false, 3000}, {false, 500}, {true, 500}, {true, 500}, {false, 0}, {true, 0}, {true, 0}},
	}
	for round, want := range rounds {
		key := []byte(l.KeyFor("k"))
		keys := make([][]byte, len(n))
		costs := make([]int64, len(n))
		for i := range n {
			keys[i], costs[i] = key, int64(u.cost(n[i]))
		}
		var now int64
		var den []bool
		var ats, qs []int64
		if err := l.query(ctx, l.s.take, []any{keys, int64(u.capacity), u.pArg, u.qArg, costs, l.s.lockMS, nil}, &now, &den, &ats, &qs); err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if den[i] != w.denied || qs[i] != w.q || ats[i] != ats[0] {
				t.Fatalf("round %d take %d (n=%v): denied %v, %d quanta at %d; want denied %v, %d quanta at %d", round, i, n[i], den[i], qs[i], ats[i], w.denied, w.q, ats[0])
			}
		}
		var writes int64
		if err := db.QueryRow(ctx, `SELECT n FROM writes`).Scan(&writes); err != nil {
			t.Fatal(err)
		}
		if writes != int64(round+1) {
			t.Fatalf("round %d: %d row writes in all for %d statements of one key's run, want one each", round, writes, round+1)
		}
	}
}
