package bench

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// forUpdate is the usual way to keep token buckets in PostgreSQL, the one
// pgstore's documentation sets itself against, written here from its
// description as pg-ratelimit's token bucket does it: per check one
// transaction,
//
//	BEGIN
//	INSERT a full bucket, ON CONFLICT DO NOTHING
//	SELECT the bucket FOR UPDATE
//	refill and decide in the application, with the application's clock
//	only if admitted: INSERT ... ON CONFLICT DO UPDATE with the new state
//	COMMIT
//
// that is five round trips for an admitted check and four for a denied one,
// with the row locked from the SELECT to the COMMIT. Refill counts whole
// intervals only (floor(elapsed / interval) × tokens per interval) and an
// admitted check restarts the interval at now, dropping the part of an
// interval that had passed; the interval is the millisecond, the
// resolution of the Node clock the design comes from. So the peer admits a
// little under the limit on a hot key, which only makes it cheaper (a denial
// skips the write): the comparison errs in its favour.
type forUpdate struct {
	pool        *pgxpool.Pool
	prefix      string
	max         float64       // capacity (burst), in tokens
	perInterval float64       // tokens refilled per whole interval
	interval    time.Duration // refill granularity
	ttl         time.Duration // a row past expires_at is a full bucket
	timeout     time.Duration // bounds each check, as pgstore's Timeout
	stmts       atomic.Int64  // statements sent, BEGIN and COMMIT included
}

// forUpdateTable is the peer's own table, UNLOGGED as pgstore's is by
// default, so that neither pays for the write-ahead log.
const forUpdateTable = "for_update_buckets"

const forUpdateSchema = `CREATE UNLOGGED TABLE IF NOT EXISTS ` + forUpdateTable + ` (
	prefix      text             NOT NULL,
	key         text             NOT NULL,
	tokens      double precision NOT NULL,
	last_refill timestamptz      NOT NULL,
	expires_at  timestamptz      NOT NULL,
	PRIMARY KEY (prefix, key)
)`

const (
	forUpdateInsert = `INSERT INTO ` + forUpdateTable + ` (prefix, key, tokens, last_refill, expires_at)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (prefix, key) DO NOTHING`
	forUpdateSelect = `SELECT tokens, last_refill, expires_at FROM ` + forUpdateTable + `
WHERE prefix = $1 AND key = $2 FOR UPDATE`
	forUpdateUpsert = `INSERT INTO ` + forUpdateTable + ` (prefix, key, tokens, last_refill, expires_at)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (prefix, key) DO UPDATE
SET tokens = EXCLUDED.tokens, last_refill = EXCLUDED.last_refill, expires_at = EXCLUDED.expires_at`
)

// newForUpdate returns the peer at lim on pool, whose database must have
// forUpdateSchema.
func newForUpdate(pool *pgxpool.Pool, prefix string, lim limit, timeout time.Duration) *forUpdate {
	const interval = time.Millisecond
	// The seed keeps a row until the bucket would be full again.
	ttl := spanOf(float64(lim.burst)/lim.rate, 100*365*24*time.Hour)
	return &forUpdate{
		pool: pool, prefix: prefix, max: float64(lim.burst),
		perInterval: lim.rate * interval.Seconds(), interval: interval,
		ttl: max(ttl, interval), timeout: timeout,
	}
}

// take spends cost tokens of key's bucket if it holds them.
func (f *forUpdate) take(ctx context.Context, key string, cost float64) (allowed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	// timestamptz keeps microseconds: now at that resolution, so that the
	// elapsed time read back is never longer than the real one.
	now := time.Now().Truncate(time.Microsecond)
	sent := int64(1)
	defer func() { f.stmts.Add(sent) }()
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	// After a Commit, Rollback does nothing; after an error it ends the
	// transaction and frees the row.
	defer tx.Rollback(context.Background())
	sent++
	if _, err := tx.Exec(ctx, forUpdateInsert, f.prefix, key, f.max, now, now.Add(f.ttl)); err != nil {
		return false, err
	}
	var tokens float64
	var last, expires time.Time
	sent++
	if err := tx.QueryRow(ctx, forUpdateSelect, f.prefix, key).Scan(&tokens, &last, &expires); err != nil {
		return false, err
	}
	left, ok := f.decide(tokens, last, expires, now, cost)
	if ok {
		sent++
		if _, err := tx.Exec(ctx, forUpdateUpsert, f.prefix, key, left, now, now.Add(f.ttl)); err != nil {
			return false, err
		}
	}
	sent++
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	return ok, nil
}

// decide is the application's half of a check: the tokens the bucket holds
// at now after taking cost, and whether it could.
func (f *forUpdate) decide(tokens float64, last, expires, now time.Time, cost float64) (left float64, ok bool) {
	current := f.max
	if !expires.Before(now) {
		// A caller whose clock read came before the one that wrote last
		// sees a negative span: it refills less, and the next caller gets
		// it back, as the spans add up.
		refilled := math.Floor(float64(now.Sub(last))/float64(f.interval)) * f.perInterval
		current = min(tokens+refilled, f.max)
	}
	left = current - cost
	return left, left >= 0
}

// TestForUpdatePeer checks that the peer decides as a token bucket, so that
// BenchmarkPostgres compares like with like: 64 goroutines on one key at a
// frozen rate admit exactly the burst, and refill, the cap and expiry work.
func TestForUpdatePeer(t *testing.T) {
	pool := pgPool(t)
	t.Run("contention", func(t *testing.T) {
		// A token every 1000 s: nothing refills during the test.
		f := newForUpdate(pool, fmt.Sprintf("test-%d", time.Now().UnixNano()), limit{rate: 0.001, burst: 100}, 30*time.Second)
		var allowed, denied atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for range 5 {
					ok, err := f.take(context.Background(), "hot", 1)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						allowed.Add(1)
					} else {
						denied.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if allowed.Load() != 100 || denied.Load() != 220 {
			t.Fatalf("%d allowed, %d denied of 320 takes: want exactly the burst, 100", allowed.Load(), denied.Load())
		}
		// Four statements for a denial, five for an admission.
		if got, want := f.stmts.Load(), int64(100*5+220*4); got != want {
			t.Errorf("%d statements, want %d", got, want)
		}
	})
	t.Run("decide", func(t *testing.T) {
		f := newForUpdate(nil, "", limit{rate: 1000, burst: 10}, time.Second)
		t0 := time.Unix(1e9, 0)
		exp := t0.Add(f.ttl)
		for _, c := range []struct {
			name     string
			tokens   float64
			now      time.Time
			expires  time.Time
			wantLeft float64
			wantOK   bool
		}{
			{"empty", 0, t0, exp, -1, false},
			{"part of an interval refills nothing", 0, t0.Add(999 * time.Microsecond), exp, -1, false},
			{"one interval, one token", 0, t0.Add(time.Millisecond), exp, 0, true},
			{"whole intervals only", 0, t0.Add(3500 * time.Microsecond), exp, 2, true},
			{"capped at the burst", 5, t0.Add(time.Hour), t0.Add(2 * time.Hour), 9, true},
			{"expired is full", 0, t0.Add(time.Hour), exp, 9, true},
			{"clock behind last", 1, t0.Add(-time.Millisecond), exp, -1, false},
		} {
			left, ok := f.decide(c.tokens, t0, c.expires, c.now, 1)
			if ok != c.wantOK || math.Abs(left-c.wantLeft) > 1e-9 {
				t.Errorf("%s: %v, %v; want %v, %v", c.name, left, ok, c.wantLeft, c.wantOK)
			}
		}
	})
}
