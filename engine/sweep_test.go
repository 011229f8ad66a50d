package engine_test

import (
	"fmt"
	"math/big"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

func TestSweepAtEvictsOnlyFullBuckets(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 10})
	e.AllowAt(t0, "a", 10) // empty at 0, full at 10 s
	e.AllowAt(t0, "b", 1)  // full at 1 s
	e.AllowAt(at(5*time.Second), "c", 1)
	if n := e.SweepAt(at(500 * time.Millisecond)); n != 0 {
		t.Errorf("sweep at 0.5 s evicted %d", n)
	}
	if n := e.SweepAt(at(3 * time.Second)); n != 1 || e.Len() != 2 {
		t.Errorf("sweep at 3 s evicted %d, Len %d; want 1 (b), 2", n, e.Len())
	}
	// A sweep with a clock behind a bucket's last update never evicts it.
	if n := e.SweepAt(at(4 * time.Second)); n != 0 {
		t.Errorf("sweep at 4 s evicted %d", n)
	}
	if n := e.SweepAt(at(10 * time.Second)); n != 2 || e.Len() != 0 {
		t.Errorf("sweep at 10 s evicted %d, Len %d; want 2, 0", n, e.Len())
	}
	if s := e.Stats(); s.Evicted != 3 || s.Live != 0 {
		t.Errorf("Stats = %+v", s)
	}
	// An evicted key comes back full.
	if d := e.AllowAt(at(10*time.Second), "a", 10); !d.Allowed {
		t.Errorf("evicted key not full: %+v", d)
	}
}

// A caller whose time is older than an eviction sees the key as the eviction
// did: full at the eviction's time, so its refill starts no earlier.
func TestEvictionCountsAsAnUpdate(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 2})
	e.AllowAt(t0, "k", 2)
	if n := e.SweepAt(at(10 * time.Second)); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
	}
	// A late caller at 5 s: the bucket is full (as at 10 s), two tokens.
	if d := e.AllowAt(at(5*time.Second), "k", 2); !d.Allowed {
		t.Fatalf("late caller denied: %+v", d)
	}
	// Its take counts from 10 s: one token back at 11 s, not at 6 s.
	if d := e.AllowAt(at(6*time.Second), "k", 1); d.Allowed || d.RetryAfter != 5*time.Second {
		t.Errorf("at 6 s: %+v, want denied with RetryAfter 5s", d)
	}
}

func TestBackgroundSweeperEvicts(t *testing.T) {
	e, err := engine.New(engine.Config{Limit: 1e6, Burst: 2, SweepInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range 1000 {
		if !e.Allow(fmt.Sprint(i)) {
			t.Fatal("first Allow denied")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Evicted may exceed 1000: a bucket the sweeper evicts between its
	// creation and its first take (it is full) is made again by that take.
	if s := e.Stats(); s.Live != 0 || s.Evicted < 1000 || s.Allowed != 1000 {
		t.Errorf("after waiting: %+v, want all evicted", s)
	}
}

// sweepers counts the goroutines that engine.New started (the background
// sweepers, running or not yet scheduled), by their stacks, so that
// goroutines of other tests cannot skew the count.
func sweepers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "created by github.com/faucetgo/faucet/engine.New ")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// settledSweepers is sweepers() once the sweepers of engines closed before
// (by earlier tests' cleanups) have left the stack: Close waits for its
// sweeper to finish, but the goroutine may still show for a moment after.
func settledSweepers() int {
	n := sweepers()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		m := sweepers()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

func TestCloseStopsTheSweeper(t *testing.T) {
	before := settledSweepers()
	var engines []*engine.Engine
	for range 20 {
		e, err := engine.New(engine.Config{Limit: 1, Burst: 1, SweepInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		e.Allow("x")
		engines = append(engines, e)
	}
	if n := sweepers(); n != before+20 {
		t.Fatalf("expected 20 more sweepers, %d -> %d", before, n)
	}
	var wg sync.WaitGroup
	for _, e := range engines {
		wg.Go(func() { e.Close(); e.Close() }) // idempotent, concurrent
		wg.Go(func() { e.Close() })
	}
	wg.Wait()
	// Close waits for its sweeper to return, so none may be left running
	// past it; the stack may still show a goroutine that is exiting, so
	// allow it a moment to go.
	deadline := time.Now().Add(5 * time.Second)
	for sweepers() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := sweepers(); n > before {
		t.Errorf("%d sweepers after Close, %d before", n, before)
	}
	// The engine still works after Close.
	if !engines[0].Allow("y") {
		t.Error("Allow after Close denied")
	}
}

// Live buckets never exceed MaxKeys, at any instant, under concurrent inserts
// and evictions.
func TestMaxKeysIsAHardBound(t *testing.T) {
	const maxKeys = 50
	e := newEngine(t, engine.Config{Limit: 1e6, Burst: 1, MaxKeys: maxKeys, Shards: 8})
	var worst atomic.Int64
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(e.Len()); n > worst.Load() {
				worst.Store(n)
			}
		}
	})
	var wg sync.WaitGroup
	var clock atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				now := clock.Add(300) // 0.3 µs: half of the buckets refill meanwhile
				e.AllowAt(time.Unix(0, now), fmt.Sprint(g, "-", i), 1)
			}
		})
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	s := e.Stats()
	if worst.Load() > maxKeys || s.Live > maxKeys {
		t.Errorf("live buckets reached %d (final %d), MaxKeys %d", worst.Load(), s.Live, maxKeys)
	}
	// Every new key that found room was admitted (its bucket starts full);
	// only those that shared the overflow bucket can have been denied.
	if s.Evicted == 0 || s.Allowed+s.Denied != 20000 || s.Denied > s.Overflow {
		t.Errorf("Stats = %+v: want evictions, and denials only among overflowing keys", s)
	}
}

// A process running for a year stays exact: the 24-bit tick field of burst
// 1e9 spans 68.7 s, and each bucket moves to later epochs as it goes. With
// -short, four months: still some 150,000 wraps.
func TestUptimeAcrossWraps(t *testing.T) {
	days := 400
	if testing.Short() {
		days = 120
	}
	const rate, burst = 100.0, 1e9 // fills in 115 days; horizon 68.7 s
	e := newEngine(t, engine.Config{Limit: rate, Burst: burst, Shards: 1})
	m := newModel(rate, burst)
	h := e.Precision().Horizon
	step := h / 5
	take := big.NewRat(5e8, 1)
	var now time.Duration
	for day := 0; day < days; day++ {
		// Sweep through the day as a background sweeper would.
		for end := now + 24*time.Hour; now < end; now += step {
			e.SweepAt(at(now))
			e.AllowAt(at(now), "busy", 1)
		}
		if day%40 == 0 {
			d := e.AllowAt(at(now), "rare", 5e8)
			exact := m.at(int64(now))
			if d.Allowed != (exact.Cmp(take) >= 0) {
				t.Fatalf("day %d: engine %+v, exact tokens %v", day, d, ratF(exact))
			}
			if d.Allowed {
				m.take(int64(now), take)
			}
			got, want := exactTokens(e.TokensAt(at(now), "rare")), m.at(int64(now))
			if new(big.Rat).Sub(want, got).Cmp(big.NewRat(8190, 1)) >= 0 || got.Cmp(want) > 0 {
				t.Fatalf("day %d: engine %v tokens, exact %v", day, ratF(got), ratF(want))
			}
		}
	}
	if e.Len() != 2 {
		t.Errorf("Len = %d, want 2", e.Len())
	}
}

// One key idle for a year, with nothing else written, comes back full: its
// word is exact on its own, whatever time it is read at.
func TestLongIdleWithoutSweeps(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 100, Burst: 1e9})
	e.AllowAt(t0, "k", 1e9)
	if d := e.AllowAt(at(366*24*time.Hour), "k", 1e9); !d.Allowed {
		t.Errorf("after a year idle: %+v, want full", d)
	}
}

// With a sweeper that never runs, an idle key among busy ones is read
// exactly. (Its word used to be pushed out of a window that other keys'
// progress moved, and read late: denied for tokens it had.)
func TestStalledSweeperStaysExact(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 32, Burst: 1e9}) // fills in 362 days, horizon 68.7 s
	e.AllowAt(t0, "victim", 1e9)
	m := newModel(32, 1e9)
	m.take(0, big.NewRat(1e9, 1))
	var now time.Duration
	for i := 0; i < 200; i++ {
		now += 17 * time.Second
		e.AllowAt(at(now), "other", 1)
		got, want := exactTokens(e.TokensAt(at(now), "victim")), m.at(int64(now))
		if got.Cmp(want) > 0 || new(big.Rat).Sub(want, got).Cmp(big.NewRat(4, 1000)) >= 0 {
			t.Fatalf("at %v: victim shows %v tokens, exact %v", now, ratF(got), ratF(want))
		}
	}
}

func TestKeysOfAnyLength(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
	for _, n := range []int{0, 1, 14, 15, 65534, 65535, 65536, 1 << 20} {
		k := strings.Repeat("k", n)
		if !e.AllowAt(t0, k, 1).Allowed || e.AllowAt(t0, k, 1).Allowed {
			t.Errorf("key of %d bytes: want one admission", n)
		}
	}
}
