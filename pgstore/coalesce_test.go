package pgstore

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// watchDB is a DB over a pool that watches the take statements (calls of
// Table_take): how many are in flight and the most ever at once. hold
// stops the next one before it is sent until its release, and failNext
// answers the next ones with an error instead of sending them.
type watchDB struct {
	pool *pgxpool.Pool

	mu       sync.Mutex
	inFlight int
	most     int
	gate     chan struct{}
	fail     error
	// arrived gets a value when a held statement reaches its gate.
	arrived chan struct{}
}

func newWatchDB(pool *pgxpool.Pool) *watchDB {
	return &watchDB{pool: pool, arrived: make(chan struct{}, 1)}
}

func (w *watchDB) Begin(ctx context.Context) (pgx.Tx, error) { return w.pool.Begin(ctx) }

func (w *watchDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return w.pool.Exec(ctx, sql, args...)
}

func (w *watchDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !strings.Contains(sql, `_take"(`) {
		return w.pool.QueryRow(ctx, sql, args...)
	}
	w.mu.Lock()
	w.inFlight++
	w.most = max(w.most, w.inFlight)
	gate, fail := w.gate, w.fail
	w.gate = nil
	w.mu.Unlock()
	if gate != nil {
		w.arrived <- struct{}{}
		<-gate
	}
	if fail != nil {
		return watchedRow{w, nil, fail}
	}
	return watchedRow{w, w.pool.QueryRow(ctx, sql, args...), nil}
}

// hold stops the next take statement before it is sent; the function
// returned lets it go.
func (w *watchDB) hold() (release func()) {
	gate := make(chan struct{})
	w.mu.Lock()
	w.gate = gate
	w.mu.Unlock()
	return func() { close(gate) }
}

// failWith makes take statements fail with err (nil: sends them again).
func (w *watchDB) failWith(err error) {
	w.mu.Lock()
	w.fail = err
	w.mu.Unlock()
}

// mostInFlight is the most take statements ever in flight at once.
func (w *watchDB) mostInFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.most
}

// watchedRow ends a statement's flight when it is scanned.
type watchedRow struct {
	w   *watchDB
	row pgx.Row
	err error
}

func (r watchedRow) Scan(dst ...any) error {
	defer func() {
		r.w.mu.Lock()
		r.w.inFlight--
		r.w.mu.Unlock()
	}()
	if r.err != nil {
		return r.err
	}
	return r.row.Scan(dst...)
}

// TestCoalescingOneStatementPerKey: 64 callers taking from one key keep at
// most one statement of it in flight, so that they send far fewer
// statements than takes, and still admit exactly Burst.
func TestCoalescingOneStatementPerKey(t *testing.T) {
	w := newWatchDB(newDB(t, Schema{}))
	l := mustNew(t, w, Config{Limit: frozen, Burst: 100, Prefix: uniquePrefix(), Timeout: 30 * time.Second})
	const callers, each = 64, 5
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				d, err := l.Take(context.Background(), "hot", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 100 || denied.Load() != callers*each-100 {
		t.Fatalf("%d allowed, %d denied of %d takes: want exactly the burst, 100", allowed.Load(), denied.Load(), callers*each)
	}
	if m := w.mostInFlight(); m != 1 {
		t.Errorf("%d statements of one key in flight at once, want 1", m)
	}
	if s := l.Stats(); s.Calls >= callers*each || s.Allowed+s.Denied != callers*each {
		t.Errorf("stats %+v: want fewer statements than the %d takes, each take counted once", s, callers*each)
	}
}

// TestCoalescedConcurrentFixedTime: callers racing on one key at one fixed
// time of the store's clock, however their takes are batched, are decided
// as some order of single takes: what the allowed takes cost is exactly
// what the bucket lost, and every denied take found less than it asked.
func TestCoalescedConcurrentFixedTime(t *testing.T) {
	w := newWatchDB(newDB(t, Schema{}))
	l := mustNew(t, w, Config{Limit: 10, Burst: 50, Prefix: uniquePrefix(), Timeout: 30 * time.Second})
	us := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).UnixMicro()
	costs := []float64{0, 0.5, 1, 1, 2, 3.5}
	var mu sync.Mutex
	var taken float64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 4 {
				n := costs[(g+i)%len(costs)]
				var out [1]engine.Decision
				at := us
				_, now, err := l.takeAll(context.Background(), []engine.Take{{Limiter: l, Key: "hot", N: n}}, out[:], &at)
				d := out[0]
				if err != nil || now.UnixMicro() != us {
					t.Errorf("take of %v: %v at %v", n, err, now)
					return
				}
				if !d.Allowed && d.Remaining >= n {
					t.Errorf("take of %v denied with %v tokens left", n, d.Remaining)
				}
				if d.Allowed {
					mu.Lock()
					taken += n
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	at := us
	var out [1]engine.Decision
	if _, _, err := l.takeAll(context.Background(), []engine.Take{{Limiter: l, Key: "hot", N: 0}}, out[:], &at); err != nil {
		t.Fatal(err)
	}
	if left := out[0].Remaining; taken+left != 50 || taken < 40 {
		t.Fatalf("allowed takes cost %v and %v tokens are left: want 50 in all, most of it taken", taken, left)
	}
	if m := w.mostInFlight(); m != 1 {
		t.Fatalf("%d statements of one key in flight at once, want 1", m)
	}
}
