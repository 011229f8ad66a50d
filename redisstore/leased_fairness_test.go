package redisstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// Fairness under leases: three instances keep one key far above its limit;
// a fourth that starts later is not starved by the leases they hold, and
// gets a share of the refill close to theirs (each of the four at least a
// third of an equal share: a starved instance gets next to nothing, while
// on two loaded cores the scheduler alone moves a share by half). Meanwhile the tokens held in leases never exceed
// the documented bound, 2 × MaxShare × Burst per instance (a lease being
// spent and one fetched ahead), and once demand stops they go back to the
// shared bucket within half a lifetime.
func TestLeasedNewcomerGetsItsShare(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct{ limit, burst float64 }{{100, 100}, {10_000, 10_000}} {
		t.Run(fmt.Sprintf("limit=%v/burst=%v", tc.limit, tc.burst), func(t *testing.T) {
			const instances, workers = 4, 4
			const lifetime = 400 * time.Millisecond
			opts := LeaseOptions{Lifetime: lifetime}
			var ls []*Leased
			for range instances {
				l := leaseLimiterPrefix(t, srv.Addr(), fmt.Sprintf("fair-%v:", tc.limit), engine.Limit(tc.limit), tc.burst)
				s, err := NewLeased(l, opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close(); l.Close() })
				ls = append(ls, s)
			}
			// The newcomer joins at 2 s and all stop at 6 s; shares are
			// counted over the last 4 s, when all four compete.
			const joinAt, stopAt = 2 * time.Second, 6 * time.Second
			start := time.Now()
			var counted [instances]atomic.Int64
			var wg sync.WaitGroup
			for i := range instances {
				for range workers {
					wg.Go(func() {
						if i == instances-1 {
							time.Sleep(joinAt)
						}
						for time.Since(start) < stopAt {
							d, err := ls[i].Take(context.Background(), "hot", 1)
							if err != nil {
								t.Error(err)
								return
							}
							if d.Allowed && time.Since(start) >= joinAt {
								counted[i].Add(1)
							}
							if !d.Allowed {
								// Callers far above the limit, not
								// spinning: 16 spinning goroutines on two
								// cores would let the scheduler's time
								// slices, not the leases, pick who wins
								// each refill.
								time.Sleep(time.Millisecond)
							}
						}
					})
				}
			}
			// Sample the tokens out in leases while the load runs.
			probe := leaseLimiterPrefix(t, srv.Addr(), fmt.Sprintf("fair-%v:", tc.limit), engine.Limit(tc.limit), tc.burst)
			defer probe.Close()
			var maxOut uint64
			for time.Since(start) < stopAt {
				g, err := probe.lease(context.Background(), "hot", 0, 0, time.Second, "probe", "", 0)
				if err != nil {
					t.Fatal(err)
				}
				maxOut = max(maxOut, g.out)
				time.Sleep(5 * time.Millisecond)
			}
			wg.Wait()
			bound := uint64(instances) * 2 * uint64(math.Round(ls[0].Share()*fixedpoint.QuantaPerToken))
			var total int64
			for i := range instances {
				total += counted[i].Load()
			}
			fair := float64(total) / instances
			newcomer := float64(counted[instances-1].Load())
			t.Logf("over the last %v: admitted %d; per instance %d %d %d, newcomer %d (%.0f%% of an equal share)",
				stopAt-joinAt, total, counted[0].Load(), counted[1].Load(), counted[2].Load(), counted[3].Load(), 100*newcomer/fair)
			t.Logf("tokens out in leases: at most %.1f, bound %d instances × 2 × MaxShare × Burst = %.1f",
				float64(maxOut)/fixedpoint.QuantaPerToken, instances, float64(bound)/fixedpoint.QuantaPerToken)
			if newcomer < fair/3 {
				t.Errorf("the newcomer admitted %v, under a third of an equal share (%.0f): starved by the others' leases", newcomer, fair)
			}
			for i := range instances - 1 {
				if got := float64(counted[i].Load()); got < fair/3 {
					t.Errorf("instance %d admitted %v, under a third of an equal share (%.0f)", i, got, fair)
				}
			}
			if maxOut > bound {
				t.Errorf("%d quanta out in leases, above the bound %d", maxOut, bound)
			}
			// Demand stopped: the sweeper releases idle leases within half
			// a lifetime (idle for a quarter, swept every quarter).
			time.Sleep(lifetime/2 + 50*time.Millisecond)
			g, err := probe.lease(context.Background(), "hot", 0, 0, time.Second, "probe", "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if g.out != 0 {
				t.Errorf("%v after demand stopped, %d quanta still out in leases; want all released", lifetime/2+50*time.Millisecond, g.out)
			}
		})
	}
}
