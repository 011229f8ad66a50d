package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/redisstore/redistest"
)

// TestExactAdmissionAcrossClients: four clients (two rueidis, two go-redis,
// as four instances of a service would be) with eight goroutines each hammer
// one key of a bucket that refills one token an hour: exactly Burst requests
// pass, not one more, and none fails.
func TestExactAdmissionAcrossClients(t *testing.T) {
	s := redistest.Start(t)
	cfg := Config{Limit: 1.0 / 3600, Burst: 1000, Timeout: 10 * time.Second, OnFailure: FailClosed}
	var limiters []*Limiter
	for i := range 4 {
		var l *Limiter
		var err error
		if i%2 == 0 {
			l, err = New(newRue(t, s.Addr()), cfg)
		} else {
			l, err = NewGoRedis(newGoRedis(t, s.Addr()), cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, l)
	}
	var allowed, failed atomic.Int64
	var wg sync.WaitGroup
	for _, l := range limiters {
		for range 8 {
			wg.Go(func() {
				for denials := 0; denials < 5; {
					d, err := l.Take(context.Background(), "shared", 1)
					if err != nil {
						failed.Add(1)
						return
					}
					if d.Allowed {
						allowed.Add(1)
					} else {
						denials++
					}
				}
			})
		}
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d calls failed", failed.Load())
	}
	if got := allowed.Load(); got != 1000 {
		t.Fatalf("admitted %d, want exactly 1000", got)
	}
	var sum uint64
	for _, l := range limiters {
		sum += l.Stats().Allowed
	}
	if sum != 1000 {
		t.Fatalf("Stats.Allowed sums to %d, want 1000", sum)
	}
}
