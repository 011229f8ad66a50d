package pgstore

import (
	"testing"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/lease"
	"github.com/faucetgo/faucet/lease/leasetest"
)

// TestLeaseConformance runs the lease contract's suite against a real
// PostgreSQL server: a group is a Prefix, each store a Limiter of its own
// on one pool.
func TestLeaseConformance(t *testing.T) {
	db := newDB(t, Schema{})
	leasetest.Run(t, leasetest.Harness{
		Open: func(t *testing.T, group string, limit engine.Limit, burst float64) lease.Store {
			l, err := New(db, Config{Limit: limit, Burst: burst, Prefix: group + ":", Timeout: testTimeout, OnFailure: FailClosed})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
	})
}
