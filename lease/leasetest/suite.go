package leasetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/lease"
)

// Harness opens the stores under test.
type Harness struct {
	// Open returns a lease.Store with limit and burst. Stores opened with
	// one group share their leased buckets (as the instances of a service
	// do: the same server and key prefix), and no others do; the suite
	// makes groups unique to each run, so a group can serve as a key
	// prefix. Open registers the store's Close with t.Cleanup, and calls
	// t.Skip with a sentence naming what is missing when the server cannot
	// be reached.
	Open func(t *testing.T, group string, limit engine.Limit, burst float64) lease.Store
	// Timeout bounds each subtest; 0 means 60 s.
	Timeout time.Duration
}

// Run runs the suite against h, one subtest per property.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("leasetest: Harness.Open is nil")
	}
	if h.Timeout == 0 {
		h.Timeout = time.Minute
	}
	var id [4]byte
	rand.Read(id[:])
	run := hex.EncodeToString(id[:])
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			watch := time.AfterFunc(h.Timeout, func() {
				t.Errorf("%s: still running after %v: the store hangs", c.name, h.Timeout)
			})
			defer watch.Stop()
			s := &suite{h: h, group: "lt-" + run + "-" + c.name}
			c.run(t, s)
		})
	}
}

type suite struct {
	h     Harness
	group string
}

// open is a store of the subtest's group.
func (s *suite) open(t *testing.T, limit engine.Limit, burst float64) lease.Store {
	t.Helper()
	st := s.h.Open(t, s.group, limit, burst)
	if st == nil {
		t.Fatal("leasetest: Harness.Open returned nil")
	}
	return st
}

// leased is a Leased limiter on a new store of the subtest's group: another
// instance.
func (s *suite) leased(t *testing.T, limit engine.Limit, burst float64, o lease.Options) *lease.Leased {
	t.Helper()
	l, err := lease.New(s.open(t, limit, burst), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

var cases = []struct {
	name string
	run  func(*testing.T, *suite)
}{
	{"Contract", testContract},
	{"NeverOverAdmits", testNeverOverAdmits},
	{"NewcomerGetsAShare", testNewcomer},
	{"IdleTokensGoBack", testIdleTokensGoBack},
	{"DeadHolderExpires", testDeadHolder},
}

// slowest is the slowest limit a store accepts with a burst of 10 (a
// refill of the burst in 365 days): its refill over a test is nothing, so
// grants and releases show exact figures.
const slowest = engine.Limit(10.0 / 31536000)

func report(t *testing.T, st lease.Store, key string) lease.Grant {
	t.Helper()
	g, err := st.GrantLease(context.Background(), key, lease.Request{TTL: time.Second, ID: "report"})
	if err != nil {
		t.Fatalf("report of %q: %v", key, err)
	}
	return g
}

func checkSum(t *testing.T, what string, g lease.Grant, capacity uint64) {
	t.Helper()
	if g.Tokens+g.Out > capacity {
		t.Errorf("%s: bucket %d + leased %d quanta > capacity %d: leases minted tokens", what, g.Tokens, g.Out, capacity)
	}
}

// testContract checks each operation's figures on a limit that does not
// refill within the test.
func testContract(t *testing.T, s *suite) {
	st := s.open(t, slowest, 10)
	ctx := context.Background()
	const capacity = 10_000
	if g := report(t, st, "k"); g.Tokens != capacity || g.Out != 0 || g.Quanta != 0 || g.Now <= 0 {
		t.Fatalf("report of a new key: %+v; want a full bucket, nothing out, the store's time", g)
	}
	g, err := st.GrantLease(ctx, "k", lease.Request{Want: 6000, Least: 1, TTL: time.Minute, ID: "a"})
	if err != nil || g.Quanta != 6000 || g.Tokens != 4000 || g.Out != 6000 || g.Expiry < g.Now+59_000_000 || g.Expiry > g.Now+60_000_000 {
		t.Fatalf("grant of 6 tokens of 10: %+v, %v; want 6000 quanta granted, 4000 left, 6000 out, expiring a minute on", g, err)
	}
	// Less than Least is nothing; as much as there is, at least Least,
	// is granted.
	if g, err = st.GrantLease(ctx, "k", lease.Request{Want: 5000, Least: 4500, TTL: time.Minute, ID: "b"}); err != nil || g.Quanta != 0 || g.Tokens != 4000 || g.Wait <= time.Hour {
		t.Fatalf("grant of at least 4.5 tokens from 4: %+v, %v; want nothing, and a wait of hours at this rate", g, err)
	}
	if g, err = st.GrantLease(ctx, "k", lease.Request{Want: 5000, Least: 1000, TTL: time.Minute, ID: "b"}); err != nil || g.Quanta != 4000 || g.Tokens != 0 || g.Out != 10_000 {
		t.Fatalf("grant of 5 tokens, at least 1, from 4: %+v, %v; want the 4", g, err)
	}
	checkSum(t, "after two grants", g, capacity)
	// Nothing left: the wait covers the last lease's end.
	if g, err = st.GrantLease(ctx, "k", lease.Request{Want: 1000, Least: 1000, TTL: time.Minute, ID: "c"}); err != nil || g.Quanta != 0 || g.LastEnd < g.Now+59_000_000 || g.Wait < time.Duration(g.LastEnd-g.Now)*time.Microsecond {
		t.Fatalf("grant with the burst out: %+v, %v; want nothing, the last lease's end, and a wait past it", g, err)
	}
	// Ending the previous lease in a grant: a's unspent 2 tokens go back
	// before the grant, its 6000 leave out.
	if g, err = st.GrantLease(ctx, "k", lease.Request{Want: 1500, Least: 1, TTL: time.Minute, ID: "d", Prev: "a", Unspent: 2000}); err != nil || g.Quanta != 1500 || g.Tokens != 500 || g.Out != 5500 {
		t.Fatalf("grant ending lease a with 2 tokens unspent: %+v, %v; want 1500 granted of the 2000 back, 500 left, 5500 out", g, err)
	}
	// A release gives back at most what the lease holds.
	g, ok, err := st.ReleaseLease(ctx, "k", "b", 9000)
	if err != nil || !ok || g.Tokens != 4500 || g.Out != 1500 {
		t.Fatalf("release of b (4000 held) claiming 9000 unspent: %v %+v %v; want 4000 back, 4500 in the bucket, 1500 out", ok, g, err)
	}
	if _, ok, err := st.ReleaseLease(ctx, "k", "b", 4000); ok || err != nil {
		t.Errorf("a second release of b: %v, %v; want nothing", ok, err)
	}
	if _, ok, err := st.ReleaseLease(ctx, "k", "never", 1); ok || err != nil {
		t.Errorf("release of a lease never granted: %v, %v; want nothing", ok, err)
	}
	if g := report(t, st, "k"); g.Tokens != 4500 || g.Out != 1500 {
		t.Errorf("report: %+v; want 4500 in the bucket, 1500 out", g)
	}
	// Keys are apart.
	if g := report(t, st, "other"); g.Tokens != capacity || g.Out != 0 {
		t.Errorf("another key: %+v; want it full", g)
	}
	// So are stores of another group (another service's buckets).
	other := s.h.Open(t, s.group+"-apart", slowest, 10)
	if g := report(t, other, "k"); g.Tokens != capacity || g.Out != 0 {
		t.Errorf("the key in another group: %+v; want it full", g)
	}
}

// testNeverOverAdmits runs three instances of 4 goroutines each on one key
// far above its limit: together they admit at most Burst + Limit × span,
// where the span runs from before the first check to after the last, and
// most of Limit × span.
func testNeverOverAdmits(t *testing.T, s *suite) {
	for _, tc := range []struct{ limit, burst float64 }{{200, 20}, {2000, 50}} {
		t.Run(fmt.Sprintf("limit=%v/burst=%v", tc.limit, tc.burst), func(t *testing.T) {
			const instances = 3
			var ls []*lease.Leased
			for range instances {
				ls = append(ls, s.leased(t, engine.Limit(tc.limit), tc.burst, lease.Options{Lifetime: 200 * time.Millisecond, MaxShare: 0.25}))
			}
			key := fmt.Sprintf("hot-%v", tc.limit)
			var admitted, checks atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			stopAt := start.Add(time.Second)
			for i := range 4 * instances {
				l := ls[i%instances]
				wg.Go(func() {
					for time.Now().Before(stopAt) {
						d, err := l.Take(context.Background(), key, 1)
						if err != nil {
							t.Error(err)
							return
						}
						checks.Add(1)
						if d.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			span := time.Since(start).Seconds()
			bound := tc.burst + tc.limit*span + 0.001
			var st lease.Stats
			for _, l := range ls {
				s := l.Stats()
				st.Waited, st.Grants, st.Releases = st.Waited+s.Waited, st.Grants+s.Grants, st.Releases+s.Releases
			}
			t.Logf("admitted %d of %d checks in %.3f s (bound %.1f, %.1f%% of it); %d grants, %d releases, %d checks waited",
				admitted.Load(), checks.Load(), span, bound, 100*float64(admitted.Load())/bound, st.Grants, st.Releases, st.Waited)
			if got := float64(admitted.Load()); got > bound {
				t.Errorf("%d instances admitted %v in %.3f s, above Burst + Limit × span = %.3f", instances, got, span, bound)
			}
			if got := float64(admitted.Load()); got < 0.4*tc.limit*span {
				t.Errorf("admitted %v, under 40%% of Limit × span (%.1f): leases strand tokens", got, tc.limit*span)
			}
		})
	}
}

// testNewcomer: three instances keep one key far above its limit; a fourth
// that starts later is not starved by the leases they hold, and gets at
// least a third of an equal share of the refill (a starved one gets next
// to nothing; on a loaded machine the scheduler alone moves a share by
// half).
func testNewcomer(t *testing.T, s *suite) {
	const instances, workers = 4, 3
	const limit, burst = 1000, 100
	var ls []*lease.Leased
	for range instances {
		ls = append(ls, s.leased(t, limit, burst, lease.Options{Lifetime: 300 * time.Millisecond}))
	}
	const joinAt, stopAt = time.Second, 3 * time.Second
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
						// Callers above the limit, not spinning: on a
						// few cores spinning goroutines let the
						// scheduler, not the leases, pick who wins.
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
	}
	wg.Wait()
	var total int64
	for i := range instances {
		total += counted[i].Load()
	}
	fair := float64(total) / instances
	t.Logf("over the last %v: admitted %d; per instance %d %d %d, newcomer %d", stopAt-joinAt, total,
		counted[0].Load(), counted[1].Load(), counted[2].Load(), counted[3].Load())
	for i := range instances {
		if got := float64(counted[i].Load()); got < fair/3 {
			t.Errorf("instance %d (the newcomer: %v) admitted %v, under a third of an equal share (%.0f)", i, i == instances-1, got, fair)
		}
	}
}

// testIdleTokensGoBack: while instances keep a key busy, the tokens out in
// leases stay within 2 × MaxShare × Burst per instance (a lease being spent
// and one fetched ahead); once demand stops, they go back to the bucket
// within half a lifetime (idle for a quarter, swept every quarter), and
// the bucket refills to the burst.
func testIdleTokensGoBack(t *testing.T, s *suite) {
	const instances = 3
	const limit, burst = 500, 100
	const lifetime = 400 * time.Millisecond
	var ls []*lease.Leased
	for range instances {
		ls = append(ls, s.leased(t, limit, burst, lease.Options{Lifetime: lifetime, MaxShare: 0.2}))
	}
	probe := s.open(t, limit, burst)
	capacity, _ := fixedpoint.QuantizeExact(burst)
	share := uint64(math.Round(ls[0].Share() * fixedpoint.QuantaPerToken))
	bound := instances * 2 * share
	var wg sync.WaitGroup
	stopAt := time.Now().Add(time.Second)
	for i := range 2 * instances {
		wg.Go(func() {
			for time.Now().Before(stopAt) {
				if d, err := ls[i%instances].Take(context.Background(), "busy", 1); err != nil {
					t.Error(err)
					return
				} else if !d.Allowed {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	var maxOut uint64
	for time.Now().Before(stopAt) {
		g := report(t, probe, "busy")
		checkSum(t, "under load", g, capacity)
		maxOut = max(maxOut, g.Out)
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("tokens out in leases: at most %.3f, bound %.3f", fixedpoint.TokensOf(maxOut), fixedpoint.TokensOf(bound))
	if maxOut > bound {
		t.Errorf("%d quanta out in leases, above %d instances × 2 × MaxShare × Burst = %d", maxOut, instances, bound)
	}
	if maxOut == 0 {
		t.Errorf("no tokens were ever out in leases: the test did not exercise them")
	}
	// Each released lease's tokens are back in the bucket, which then
	// refills to the burst: in 0.2 s at this limit.
	time.Sleep(lifetime/2 + 50*time.Millisecond)
	if g := report(t, probe, "busy"); g.Out != 0 {
		t.Errorf("%v after demand stopped, %d quanta still out in leases; want all released", lifetime/2+50*time.Millisecond, g.Out)
	}
	time.Sleep(250 * time.Millisecond)
	if g := report(t, probe, "busy"); g.Tokens != capacity {
		t.Errorf("after the release and a burst's refill the bucket holds %d quanta, want %d", g.Tokens, capacity)
	}
}

// testDeadHolder: an instance that dies holding most of the burst (a lease
// granted and never ended, which is what the store sees of it) keeps it
// from the others until the lease expires, never longer, and never gives
// it to anyone twice.
func testDeadHolder(t *testing.T, s *suite) {
	const limit, burst = 100, 10
	const ttl = 600 * time.Millisecond
	dead := s.open(t, limit, burst)
	g, err := dead.GrantLease(context.Background(), "hot", lease.Request{Want: 9000, Least: 9000, TTL: ttl, ID: "dead-1"})
	if err != nil || g.Quanta != 9000 {
		t.Fatalf("the holder's lease: %+v, %v", g, err)
	}
	granted := time.Now()
	live := s.leased(t, limit, burst, lease.Options{Lifetime: time.Second, MaxShare: 1})
	d, err := live.Take(context.Background(), "hot", burst)
	if time.Since(granted) < ttl/2 && (err != nil || d.Allowed) {
		t.Fatalf("a whole burst while the dead lease holds most of it: %+v, %v; want a denial", d, err)
	}
	if err == nil && !d.Allowed && d.RetryAfter < ttl/2-time.Since(granted) {
		t.Errorf("denied with RetryAfter %v, %v after the dead lease of %v: early", d.RetryAfter, time.Since(granted), ttl)
	}
	// Once the lease has expired and the bucket had a burst's refill time
	// (100 ms), the whole burst passes.
	time.Sleep(time.Until(granted.Add(ttl + 100*time.Millisecond + 100*time.Millisecond)))
	if d, err := live.Take(context.Background(), "hot", burst); err != nil || !d.Allowed {
		t.Errorf("a lifetime and a refill after the holder died: %+v, %v; want the whole burst", d, err)
	}
	// Its lease is gone: releasing it now gives nothing back.
	if _, ok, err := dead.ReleaseLease(context.Background(), "hot", "dead-1", 9000); ok || err != nil {
		t.Errorf("release of the expired lease: %v, %v; want nothing", ok, err)
	}
	checkSum(t, "at the end", report(t, dead, "hot"), 10_000)
}
