package fuzz

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// The sequential specification of linModel, checked call by call on one
// goroutine: takes at times out of order, sweeps ahead of and behind the
// callers, and changes of limit (sometimes at a time before a key's last
// update, or before the last change), on a moving or a frozen clock. Every
// output, the waits included, must be exactly linStep's. It pins down what
// TestLinearizable checks under concurrency, and names the first call that
// differs.
func TestSequentialAgainstSpec(t *testing.T) {
	for seed := range uint64(300) {
		e, err := engine.New(engine.Config{Limit: linRate, Burst: linBurst, Shards: 64, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		base := time.Unix(1_700_000_000, 0)
		e.TokensAt(base, "")
		timeAt := func(us int64) time.Time { return base.Add(time.Duration(us) * time.Microsecond) }
		keys := linKeys(4, 64)
		states := map[string]linState{}
		for _, k := range keys {
			states[k] = linState{linCap, math.MinInt64, false, 1, linCap}
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		var clock, latestSweep int64
		var trail []string
		for i, changes := 0, 0; i < 400; i++ {
			if seed%2 == 0 {
				clock += int64(rng.IntN(40))
			}
			if rng.IntN(100) == 0 {
				clock += linMaxCap + 1000
			}
			switch rng.IntN(20) {
			case 0:
				at := max(0, latestSweep, clock-int64(rng.IntN(50)))
				lim := linLimits[changes%len(linLimits)]
				changes++
				if err := e.SetAt(timeAt(at), engine.Limit(lim.rate*1000), float64(lim.cap)/1000); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					states[k], _ = linStep(states[k], linInput{key: k, t: at, set: true, rate: lim.rate, cap: lim.cap})
				}
				trail = append(trail, fmt.Sprintf("%d: SetAt(%dµs, %d/µs, %d)", i, at, lim.rate, lim.cap))
				continue
			case 1:
				at := max(0, clock+int64(rng.IntN(200))-100)
				latestSweep = max(latestSweep, at)
				e.SweepAt(timeAt(at))
				for _, k := range keys {
					states[k], _ = linStep(states[k], linInput{key: k, t: at, sweep: true})
				}
				trail = append(trail, fmt.Sprintf("%d: SweepAt(%dµs)", i, at))
				continue
			}
			in := linInput{key: keys[rng.IntN(len(keys))], t: clock - int64(rng.IntN(30)), cost: int64(rng.IntN(6000))}
			d := e.AllowAt(timeAt(in.t), in.key, float64(in.cost)/1000)
			got := linOutput{d.Allowed, int64(math.Round(d.Remaining * 1000)), int64(d.RetryAfter), int64(d.ResetAfter)}
			next, want := linStep(states[in.key], in)
			trail = append(trail, fmt.Sprintf("%d: %s", i, linModel.DescribeOperation(in, got)))
			if got != want {
				t.Fatalf("seed %d: from %s, %s returned %+v, want %+v; calls so far:\n%s",
					seed, linModel.DescribeState(states[in.key]), linModel.DescribeOperation(in, got), got, want, strings.Join(trail, "\n"))
			}
			states[in.key] = next
		}
		e.Close()
	}
}
