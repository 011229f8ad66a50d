package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/jackc/pgx/v5/pgxpool"
)

// slowConnect listens on loopback and forwards every connection to addr
// after delay: a server slow to accept new connections, as a loaded
// machine's is for a burst of them.
func slowConnect(t *testing.T, addr string, delay time.Duration) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				time.Sleep(delay)
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { io.Copy(up, c); up.Close() }()
				io.Copy(c, up)
			})
		}
	})
	return lis.Addr().String()
}

// Checks that miss their deadline while the pool opens the connections a
// burst of new keys needs fail, taking nothing, but do not open the
// breaker while the connection already open keeps answering: the database
// is healthy. (Counting them, two misses opened the breaker for an hour.)
// Once no statement succeeds, the misses count again: a stalled database
// (TestStalledServer) still opens it.
func TestPoolGrowthDoesNotOpenTheBreaker(t *testing.T) {
	db := newDB(t, Schema{})
	cfg, err := pgxpool.ParseConfig(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(slowConnect(t, net.JoinHostPort(db.Config().ConnConfig.Host, strconv.Itoa(int(db.Config().ConnConfig.Port))), 600*time.Millisecond))
	cfg.ConnConfig.Host = host
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Port = uint16(p)
	cfg.MaxConns, cfg.MinConns = 4, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// One connection open: the one the first caller keeps using.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// Connections take 600 ms to open, checks 250 ms to miss: each of
	// the three callers without one misses twice or more.
	l := mustNew(t, pool, Config{Limit: 1, Burst: 1e6, Timeout: 250 * time.Millisecond, OnFailure: FailClosed, BreakAfter: 3, BreakFor: time.Hour})
	// Four callers on keys of their own, as long as the pool takes to
	// open the three connections they need beyond the first.
	var missed, slow, took atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(2 * time.Second)
	for i := range 4 {
		wg.Go(func() {
			key := "k" + strconv.Itoa(i)
			for time.Now().Before(stop) {
				_, err := l.Take(context.Background(), key, 1)
				switch {
				case err == nil:
					took.Add(1)
				case errors.Is(err, ErrBreakerOpen):
					t.Errorf("%s: %v, want a miss, not the breaker", key, err)
					return
				case errors.Is(err, engine.ErrOutcomeUnknown):
					// A first statement on a new connection that
					// outlasted the deadline on a loaded machine: a
					// failure the breaker counts, which the others'
					// successes reset.
					slow.Add(1)
				case !errors.Is(err, engine.ErrUnavailable):
					t.Errorf("%s: %v, want a miss that took nothing", key, err)
					return
				default:
					missed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if missed.Load() < 3 || took.Load() == 0 {
		t.Errorf("%d takes missed their deadline while connecting (and %d after sending), %d succeeded; want at least 3 misses (the breaker's threshold) and successes", missed.Load(), slow.Load(), took.Load())
	}
	if s := l.Stats(); s.Skipped != 0 {
		t.Errorf("the breaker answered %d takes", s.Skipped)
	}
}
