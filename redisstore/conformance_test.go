package redisstore

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/engine/limitertest"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// TestConformance runs the engine.Limiter conformance suite against a real
// redis-server, through each client. Every subtest gets a client of its own,
// which all its limiters share (so that they accept each other in TakeAll),
// and every limiter a unique Prefix.
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	var n atomic.Int64 // for Prefixes unique on the server
	for _, tc := range []struct {
		name string
		open func(t *testing.T) client
	}{
		{"rueidis", func(t *testing.T) client { return rueClient{newRue(t, srv.Addr())} }},
		{"go-redis", func(t *testing.T) client { return goRedisClient{newGoRedis(t, srv.Addr())} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			clients := map[*testing.T]client{}
			limitertest.Run(t, limitertest.Harness{
				Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
					mu.Lock()
					c, ok := clients[t]
					if !ok {
						c = tc.open(t)
						clients[t] = c
					}
					mu.Unlock()
					l, err := newLimiter(c, Config{Limit: limit, Burst: burst, Prefix: "conformance" + strconv.FormatInt(n.Add(1), 10) + ":",
						Timeout: 10 * time.Second, OnFailure: FailClosed})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { l.Close() })
					return l
				},
			})
		})
	}
}

// The Limiters a Store binds (those httplimit gets, whose keys are escaped)
// pass the suite too.
func TestStoreConformance(t *testing.T) {
	srv := redistest.Start(t)
	var n atomic.Int64
	var mu sync.Mutex
	stores := map[*testing.T]*Store{}
	limitertest.Run(t, limitertest.Harness{
		Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
			mu.Lock()
			s, ok := stores[t]
			if !ok {
				s = hsStore(t, srv.Addr(), StoreOptions{Prefix: "store-conformance:", Timeout: 10 * time.Second})
				stores[t] = s
			}
			mu.Unlock()
			l, err := s.Bind(engine.Spec{ID: "rule#" + strconv.FormatInt(n.Add(1), 10), Name: "rule", Limit: limit, Burst: burst})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Release(l) })
			return l
		},
	})
}

// Leased limiters pass the suite with the differences it states for leases:
// Remaining is the lease's, ResetAfter 0, RetryAfter never early.
func TestLeasedConformance(t *testing.T) {
	srv := redistest.Start(t)
	var n atomic.Int64
	var mu sync.Mutex
	clients := map[*testing.T]client{}
	limitertest.Run(t, limitertest.Harness{
		Leased: true,
		Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
			mu.Lock()
			c, ok := clients[t]
			if !ok {
				c = rueClient{newRue(t, srv.Addr())}
				clients[t] = c
			}
			mu.Unlock()
			l, err := newLimiter(c, Config{Limit: limit, Burst: burst, Prefix: "leased-conformance" + strconv.FormatInt(n.Add(1), 10) + ":",
				Timeout: 10 * time.Second, OnFailure: FailClosed})
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewLeased(l, LeaseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(); l.Close() })
			return s
		},
	})
}

// The calendar quotas a Store binds pass the quota suite at the server's
// clock. Every subtest gets a Store of its own, with a unique Prefix.
func TestQuotaConformance(t *testing.T) {
	srv := redistest.Start(t)
	var n atomic.Int64
	limitertest.RunQuota(t, limitertest.QuotaHarness{
		Store: func(t *testing.T) engine.Store {
			return hsStore(t, srv.Addr(), StoreOptions{Prefix: "quota-conformance" + strconv.FormatInt(n.Add(1), 10) + ":",
				Timeout: 10 * time.Second, Heartbeat: -1})
		},
		Now: func(t *testing.T) time.Time { return time.UnixMilli(serverMillis(t, srv.Addr())) },
	})
}

// Redis's windows keep the window contract (limitertest.RunWindow), at the
// server's clock.
func TestWindowConformance(t *testing.T) {
	srv := redistest.Start(t)
	var n atomic.Int64
	limitertest.RunWindow(t, limitertest.WindowHarness{
		Store: func(t *testing.T) engine.Store {
			return hsStore(t, srv.Addr(), StoreOptions{Prefix: "window-conformance" + strconv.FormatInt(n.Add(1), 10) + ":",
				Timeout: 10 * time.Second, Heartbeat: -1})
		},
		Now: func(t *testing.T) time.Time { return time.UnixMilli(serverMillis(t, srv.Addr())) },
	})
}
