package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
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
// burst needs fail, taking nothing, but do not open the breaker: the
// database is healthy, and once the connections are open the checks
// succeed. (Counting them, two misses opened the breaker for an hour.)
func TestPoolGrowthDoesNotOpenTheBreaker(t *testing.T) {
	db := newDB(t, Schema{})
	cfg, err := pgxpool.ParseConfig(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(slowConnect(t, net.JoinHostPort(db.Config().ConnConfig.Host, strconv.Itoa(int(db.Config().ConnConfig.Port))), 400*time.Millisecond))
	cfg.ConnConfig.Host = host
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Port = uint16(p)
	cfg.MaxConns, cfg.MinConns = 2, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	l := mustNew(t, pool, Config{Limit: 1, Burst: 100, Timeout: 100 * time.Millisecond, OnFailure: FailClosed, BreakAfter: 2, BreakFor: time.Hour})
	missed := 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := l.Take(context.Background(), "k", 1)
		if err == nil {
			if !d.Allowed {
				t.Fatalf("a take of a full bucket: %+v", d)
			}
			break
		}
		if !errors.Is(err, engine.ErrUnavailable) || errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("take %d while the pool connects: %v, want a miss that took nothing, not the breaker", missed, err)
		}
		missed++
		if time.Now().After(deadline) {
			t.Fatalf("no take succeeded in 20 s (%d missed)", missed)
		}
	}
	if missed < 2 {
		t.Errorf("%d takes missed their deadline while connecting, want at least 2 (the breaker's threshold)", missed)
	}
	if s := l.Stats(); s.Skipped != 0 {
		t.Errorf("the breaker answered %d takes", s.Skipped)
	}
}
