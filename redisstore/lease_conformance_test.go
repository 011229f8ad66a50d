package redisstore

import (
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/lease"
	"github.com/faucetgo/faucet/lease/leasetest"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// TestLeaseConformance runs the lease contract's suite against a real
// redis-server: a group is a Prefix, each store a Limiter of its own.
func TestLeaseConformance(t *testing.T) {
	srv := redistest.Start(t)
	leasetest.Run(t, leasetest.Harness{
		Open: func(t *testing.T, group string, limit engine.Limit, burst float64) lease.Store {
			l, err := newLimiter(rueClient{newRue(t, srv.Addr())}, Config{Limit: limit, Burst: burst, Prefix: group + ":", Timeout: 10 * time.Second, OnFailure: FailClosed})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
	})
}
