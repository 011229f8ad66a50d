package httplimit_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/engine/limitertest"
	"github.com/faucetgo/faucet/httplimit"
)

// The Limiters of the memory store, bound as the Middleware binds a rule's,
// pass the conformance suite.
func TestConformance(t *testing.T) {
	var ids atomic.Int64
	limitertest.Run(t, limitertest.Harness{
		Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
			store := httplimit.NewMemoryStore(httplimit.MemoryOptions{SweepInterval: -1})
			t.Cleanup(func() { store.Close() })
			l, err := store.Bind(engine.Spec{ID: fmt.Sprintf("rule#%d", ids.Add(1)), Name: "rule", Limit: limit, Burst: burst})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Release(l) })
			return l
		},
	})
}
