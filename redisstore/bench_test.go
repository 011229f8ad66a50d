package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/redisstore/redistest"
)

// BenchmarkTake measures one decision against a local redis-server through
// each client, with a given number of concurrent callers, each on its own
// keys (1024 keys in all, so that the server, not one hot key, is measured).
// Names split for benchstat: client=..., callers=....
func BenchmarkTake(b *testing.B) {
	s := redistest.Start(b)
	for _, client := range []string{"rueidis", "go-redis"} {
		var l *Limiter
		var err error
		cfg := Config{Limit: 1e6, Burst: 1e6, Timeout: 10 * time.Second, OnFailure: FailClosed}
		if client == "rueidis" {
			l, err = New(newRue(b, s.Addr()), cfg)
		} else {
			l, err = NewGoRedis(newGoRedis(b, s.Addr()), cfg)
		}
		if err != nil {
			b.Fatal(err)
		}
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(i)
		}
		for _, callers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("client=%s/callers=%d", client, callers), func(b *testing.B) {
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				var next, failed atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					i := int(next.Add(1)) * 61
					for pb.Next() {
						if _, err := l.Take(context.Background(), keys[i%len(keys)], 1); err != nil {
							failed.Add(1)
						}
						i++
					}
				})
				if failed.Load() != 0 {
					b.Fatalf("%d calls failed", failed.Load())
				}
			})
		}
	}
}
