package engine_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// A table filled by floods of distinct keys must not switch the limit off.
// With rule 1/s, burst 5 and MaxKeys 1000, five floods of 1000 new keys
// each (taking one token per key, all within 1 s) used to leave every later
// new key admitted without a bucket: a new key got 20 of 20 through. Now the
// keys that find the table full share one overflow bucket, so all of them
// together get at most Burst + Limit*span.
func TestFullTableStillLimits(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 5, MaxKeys: 1000, SweepInterval: -1})
	admitted := 0
	for flood := range 5 {
		for i := range 1000 {
			now := at(time.Duration(flood*1000+i) * 100 * time.Microsecond)
			if e.AllowAt(now, fmt.Sprintf("flood%d-key%d", flood, i), 1).Allowed && flood > 0 {
				admitted++
			}
		}
	}
	span := 0.5 // the floods after the first lasted 0.4 s, within 0.5 s
	if s := e.Stats(); s.Overflow != 4000 || s.Live != 1000 {
		t.Fatalf("Stats = %+v, want 4000 overflowing keys and a full table", s)
	}
	if max := 5 + 1*span; float64(admitted) > max {
		t.Errorf("keys without a bucket got %d tokens in %vs, more than burst + rate*span = %v", admitted, span, max)
	}
	newKey := 0
	for i := range 20 {
		if e.AllowAt(at(500*time.Millisecond+time.Duration(i)*time.Millisecond), "new-client", 1).Allowed {
			newKey++
		}
	}
	if newKey+admitted > 5+1 {
		t.Errorf("a new key got %d of 20 after the floods (the floods %d): the overflow bucket is not shared", newKey, admitted)
	}
}

// The overflow bucket decides like a bucket: truthful Remaining, RetryAfter
// and ResetAfter, and nothing is stored for the key itself.
func TestOverflowDecisions(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 2, MaxKeys: 1, SweepInterval: -1})
	e.AllowAt(t0, "resident", 1) // not full again until 1 s
	d := e.AllowAt(t0, "a", 1.5)
	if !d.Allowed || d.Remaining != 0.5 || d.ResetAfter != 1500*time.Millisecond {
		t.Errorf("first overflow take = %+v, want allowed, 0.5 left, full in 1.5 s", d)
	}
	d = e.AllowAt(at(100*time.Millisecond), "b", 1)
	if d.Allowed || d.Remaining != 0.6 || d.RetryAfter != 400*time.Millisecond {
		t.Errorf("second key through the same bucket = %+v, want denied, 0.6 left, retry in 0.4 s", d)
	}
	if got := e.TokensAt(at(100*time.Millisecond), "a"); got != 0.6 || e.Len() != 1 {
		t.Errorf("key a sees %v (Len %d): want no bucket of its own, and the overflow bucket's 0.6", got, e.Len())
	}
	// Once the resident bucket is full it can go, and a new key is stored.
	if d := e.AllowAt(at(time.Second), "c", 2); !d.Allowed || e.TokensAt(at(time.Second), "c") != 0 {
		t.Errorf("new key with room: %+v, want its own bucket, drained", d)
	}
	if s := e.Stats(); s.Overflow != 2 || s.Evicted != 1 || s.Allowed != 3 || s.Denied != 1 {
		t.Errorf("Stats = %+v", s)
	}
}

func TestOverflowDeny(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 2, MaxKeys: 2, OnFull: engine.FullDeny, SweepInterval: -1})
	e.AllowAt(t0, "a", 2)
	e.AllowAt(at(500*time.Millisecond), "b", 2)
	d := e.AllowAt(at(time.Second), "c", 1)
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != time.Second {
		t.Errorf("new key at capacity: %+v, want denied, RetryAfter 1s (a is full at 2 s)", d)
	}
	if d := e.AllowAt(at(2*time.Second), "c", 1); !d.Allowed {
		t.Errorf("after a filled up: %+v, want allowed", d)
	}
	if s := e.Stats(); s.Overflow != 1 || s.Denied != 1 || s.Evicted != 1 || s.Live != 2 {
		t.Errorf("Stats = %+v", s)
	}
}

// A sweep evicts the overflow bucket once it is full (lossless: a new one
// starts full), like any bucket; it is no key's, so
// it counts in neither Len nor Evicted.
func TestSweepEvictsTheOverflowBucket(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 2, MaxKeys: 1, SweepInterval: -1})
	e.AllowAt(t0, "resident", 2)
	e.AllowAt(t0, "a", 2) // drains the overflow bucket
	if n := e.SweepAt(at(time.Second)); n != 0 {
		t.Errorf("sweep at 1 s evicted %d, want 0 (nothing full yet)", n)
	}
	if d := e.AllowAt(at(time.Second), "b", 2); d.Allowed || d.Remaining != 1 {
		t.Errorf("overflow at 1 s = %+v, want denied with 1 token", d)
	}
	if n := e.SweepAt(at(3 * time.Second)); n != 1 || e.Len() != 0 {
		t.Errorf("sweep at 3 s evicted %d (Len %d), want the resident only", n, e.Len())
	}
	if s := e.Stats(); s.Evicted != 1 {
		t.Errorf("Stats = %+v, want the resident's eviction only", s)
	}
	// The sweep took the full overflow bucket; a caller with a time before
	// the sweep finds it full, as a new one is.
	e2 := newEngine(t, engine.Config{Limit: 1, Burst: 2, MaxKeys: 1, SweepInterval: -1})
	e2.AllowAt(t0, "resident", 1)
	e2.AllowAt(t0, "a", 2)
	e2.SweepAt(at(2 * time.Second))
	if d := e2.AllowAt(at(2*time.Second), "b", 2); !d.Allowed {
		t.Errorf("after the sweep: %+v, want a full overflow bucket", d)
	}
}

// A TakeAll denied after an overflowing take gives the tokens back to the
// overflow bucket.
func TestTakeAllGivesBackToTheOverflowBucket(t *testing.T) {
	users := newEngine(t, engine.Config{Limit: 1, Burst: 2, MaxKeys: 1, SweepInterval: -1})
	global := newEngine(t, engine.Config{Limit: 1, Burst: 1, SweepInterval: -1})
	users.AllowAt(t0, "resident", 1)
	global.AllowAt(t0, "all", 1)
	out := make([]engine.Decision, 2)
	takes := []engine.Take{{Limiter: users, Key: "newcomer", N: 2}, {Limiter: global, Key: "all", N: 1}}
	if k := takeAllAt(t0, takes, out); k != 1 {
		t.Fatalf("TakeAllAt = %d, want 1 (global is empty)", k)
	}
	if out[0].Allowed || out[0].Remaining != 2 {
		t.Errorf("out[0] = %+v, want the overflow bucket given back to 2", out[0])
	}
	if d := users.AllowAt(t0, "another", 2); !d.Allowed {
		t.Errorf("overflow after the give-back = %+v, want allowed", d)
	}
}

// Goroutines on a full table with a frozen clock admit exactly Burst tokens
// through the overflow bucket, together.
func TestOverflowExactUnderContention(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 100, MaxKeys: 8, Shards: 1, SweepInterval: -1})
	for i := range 8 {
		e.AllowAt(t0, fmt.Sprint("resident", i), 1)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if e.AllowAt(t0, fmt.Sprint(g, "-", i), 1).Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 100 {
		t.Errorf("%d admitted through the overflow bucket, want exactly the burst, 100", got)
	}
	if s := e.Stats(); s.Overflow != 1600 || s.Live != 8 {
		t.Errorf("Stats = %+v", s)
	}
}

// A call whose overflow bucket a sweep evicts between handing it out and
// the take retries with the next one; it counted in Stats.Overflow once per
// attempt (317 extra in 175,788 calls), inflating faucet_overflow_total.
func TestOverflowCountedOncePerCall(t *testing.T) {
	day := 24 * time.Hour
	e := newEngine(t, engine.Config{Limit: 1, Burst: 1, MaxKeys: 1, Shards: 1, SweepInterval: -1})
	e.AllowAt(at(20*day), "resident", 1) // not full before 20 days and 1 s
	var calls atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			e.AllowAt(t0, "x", 1) // every call finds the table full
			calls.Add(1)
		}
	})
	// Each sweep evicts the overflow bucket, full since 1 s after t0.
	for ts := 7 * day; ts < 9*day; ts += time.Second {
		e.SweepAt(at(ts))
	}
	stop.Store(true)
	wg.Wait()
	if s := e.Stats(); s.Overflow != calls.Load() || s.Live != 1 {
		t.Errorf("%d calls, Stats %+v: want Overflow = calls", calls.Load(), s)
	}
}

// Reports on a key without a bucket while the table is full tell what a
// take would meet: the overflow bucket's state (FullShare), or the capacity
// wait (FullDeny). A denied TakeAll reported such a take as a full bucket
// with RetryAfter 0, which the same take alone contradicted.
func TestReportsOnAFullTable(t *testing.T) {
	users := newEngine(t, engine.Config{Limit: 1, Burst: 2, MaxKeys: 1, SweepInterval: -1})
	global := newEngine(t, engine.Config{Limit: 1, Burst: 1, SweepInterval: -1})
	users.AllowAt(t0, "resident", 1)
	users.AllowAt(t0, "a", 2) // drains the overflow bucket
	global.AllowAt(t0, "all", 1)
	out := make([]engine.Decision, 2)
	if k := takeAllAt(t0, []engine.Take{{Limiter: global, Key: "all", N: 1}, {Limiter: users, Key: "newcomer", N: 2}}, out); k != 0 {
		t.Fatalf("TakeAllAt = %d, want 0", k)
	}
	alone := users.AllowAt(t0, "newcomer", 2)
	if alone.Allowed || out[1].Remaining != alone.Remaining || out[1].RetryAfter != alone.RetryAfter || out[1].RetryAfter != 2*time.Second {
		t.Errorf("out[1] = %+v, but the take alone = %+v", out[1], alone)
	}
	if got := users.TokensAt(at(500*time.Millisecond), "newcomer"); got != 0.5 {
		t.Errorf("TokensAt = %v, want the overflow bucket's 0.5", got)
	}

	deny := newEngine(t, engine.Config{Limit: 1, Burst: 2, MaxKeys: 1, OnFull: engine.FullDeny, SweepInterval: -1})
	deny.AllowAt(t0, "resident", 2)
	deny.AllowAt(t0, "a", 1) // denied, and the scan learns the resident fills at 2 s
	if got := deny.TokensAt(t0, "newcomer"); got != 0 {
		t.Errorf("FullDeny: TokensAt = %v, want 0", got)
	}
	if k := takeAllAt(t0, []engine.Take{{Limiter: global, Key: "all", N: 1}, {Limiter: deny, Key: "newcomer", N: 1}}, out); k != 0 || out[1].RetryAfter != 2*time.Second {
		t.Errorf("FullDeny: TakeAllAt = %d, out[1] = %+v; want the capacity wait, 2s", k, out[1])
	}
}
