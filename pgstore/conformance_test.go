package pgstore

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/engine/limitertest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestConformance runs the engine.Limiter conformance suite against a real
// PostgreSQL server. Every subtest gets a pool of its own, which all its
// limiters share (so that they accept each other in TakeAll), and every
// limiter a unique Prefix.
func TestConformance(t *testing.T) {
	db := newDB(t, Schema{})
	dsn := db.Config().ConnString()
	var mu sync.Mutex
	pools := map[*testing.T]*pgxpool.Pool{}
	limitertest.Run(t, limitertest.Harness{
		Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
			mu.Lock()
			p, ok := pools[t]
			if !ok {
				p = poolOn(t, dsn, Schema{})
				pools[t] = p
			}
			mu.Unlock()
			l, err := New(p, Config{Limit: limit, Burst: burst, Prefix: uniquePrefix(), Timeout: testTimeout, OnFailure: FailClosed})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
	})
}

// The Limiters a Store binds, those httplimit gets, pass the suite too.
func TestStoreConformance(t *testing.T) {
	db := newDB(t, Schema{Table: "store_buckets"})
	var n sync.Mutex
	var id int
	var mu sync.Mutex
	stores := map[*testing.T]*Store{}
	limitertest.Run(t, limitertest.Harness{
		Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
			mu.Lock()
			s, ok := stores[t]
			if !ok {
				var err error
				s, err = NewStore(db, StoreOptions{Table: "store_buckets", Prefix: uniquePrefix(), Timeout: testTimeout, SweepEvery: -1})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				stores[t] = s
			}
			mu.Unlock()
			n.Lock()
			id++
			spec := engine.Spec{ID: "rule#" + strconv.Itoa(id), Name: "rule", Limit: limit, Burst: burst}
			n.Unlock()
			l, err := s.Bind(spec)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Release(l) })
			return l
		},
	})
}

// The calendar quotas a Store binds pass the quota suite at the
// database's clock. Every subtest gets a Store of its own, with a unique
// Prefix.
func TestQuotaConformance(t *testing.T) {
	db := newDB(t, Schema{})
	limitertest.RunQuota(t, limitertest.QuotaHarness{
		Store: func(t *testing.T) engine.Store { return quotaStore(t, db, StoreOptions{}) },
		Now:   func(t *testing.T) time.Time { return time.UnixMicro(dbMicros(t, db)) },
	})
}

// PostgreSQL's windows keep the window contract (limitertest.RunWindow),
// at the database's clock.
func TestWindowConformance(t *testing.T) {
	db := newDB(t, Schema{})
	limitertest.RunWindow(t, limitertest.WindowHarness{
		Store: func(t *testing.T) engine.Store { return quotaStore(t, db, StoreOptions{}) },
		Now:   func(t *testing.T) time.Time { return time.UnixMicro(dbMicros(t, db)) },
	})
}
