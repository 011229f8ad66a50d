package engine_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Regressions. Those found by FuzzSkew (module fuzz) keep their inputs in
// fuzz/testdata/fuzz/FuzzSkew as well.

// A bucket created full is stamped where the refill grid next reaches a whole
// quantum, a little after the call. A second call at the same time used to
// take that stamp for a fresh "found full" time and move the bucket another
// quantum later, so that each such call left it further behind an exact
// bucket than the documented 0.002 token.
func TestRepeatedCallsBeforeAFullStampKeepIt(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 108, Burst: 178})
	e.TokensAt(t0, "") // sets the epoch
	for range 2 {
		e.AllowAt(at(1), "k", 1)
	}
	// Exact: 176 + 108 * 2311568 ns = 176.24965 tokens; the grid's step
	// after 1 ns is at 9260 ns, so the engine holds 176.248.
	if got := e.TokensAt(at(2311569), "k"); got != 176.248 {
		t.Errorf("tokens = %v, want 176.248 (exact 176.2496)", got)
	}
	// An eviction's stamp is kept the same way: a take at the time of the
	// sweep decides as if there had been no sweep.
	plain := newEngine(t, engine.Config{Limit: 108, Burst: 178})
	plain.TokensAt(t0, "")
	for _, x := range []*engine.Engine{e, plain} {
		x.AllowAt(at(1), "e", 0.001)
	}
	sweep := at(time.Second + 1) // not on a whole quantum of the grid
	if n := e.SweepAt(sweep); n != 2 {
		t.Fatalf("evicted %d, want 2", n)
	}
	if got, want := e.AllowAt(sweep, "e", 178), plain.AllowAt(sweep, "e", 178); got != want {
		t.Errorf("after eviction: %+v, without: %+v", got, want)
	}
}

// An eviction's stamp is kept only for times before it: a take at the stamp
// itself, where the grid is already past its whole quantum, is stamped at
// the next one, as without the eviction. Kept, it would have credited that
// fraction of a quantum twice and trailed nothing: admitted a fraction of a
// quantum early.
func TestTakeAtAnEvictionStampIsNotEarly(t *testing.T) {
	cfg := engine.Config{Limit: engine.Limit(1.0 / 86400), Burst: 1} // 86.4 s a quantum
	swept, plain := newEngine(t, cfg), newEngine(t, cfg)
	sweep := at(120960 * time.Second) // 1.4 days: the grid is a hair short of a quantum
	for _, e := range []*engine.Engine{swept, plain} {
		e.AllowAt(t0, "k", 1)
		e.AllowAt(sweep, "k", 0)
	}
	if n := swept.SweepAt(sweep); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
	}
	take := sweep.Add(time.Nanosecond) // where the eviction stamped the key
	if got, want := swept.AllowAt(take, "k", 1), plain.AllowAt(take, "k", 1); got != want {
		t.Errorf("after eviction: %+v, without: %+v", got, want)
	}
}

// With ticks longer than 1 ns a call is decided at its time floored to a
// tick. A bucket one token short of full at the floor is full by the call's
// real time, and refill counted from the floor used to credit again what the
// cap discarded in between: up to a tick's refill more than an exact bucket.
func TestFillWithinTheCallsTickIsNotCreditedTwice(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1e9, Burst: 1e9}) // 4096 ns ticks
	e.TokensAt(t0, "")                                       // sets the epoch
	e.AllowAt(t0, "k", 1)
	// Exact: full again at 1 ns; 1e9 - 1e7 tokens left at 4000 ns.
	e.AllowAt(at(4000), "k", 1e7)
	// Exact at 53 µs: 990000000 + 49000 tokens.
	if got := e.TokensAt(at(53000), "k"); got > 990049000 {
		t.Errorf("tokens at 53 µs = %v, more than the exact 990049000", got)
	}
}

// A new key at a time before the engine's epoch (a caller that read the
// clock before another caller's first call) refills from its own time, not
// from the epoch.
func TestNewKeyBeforeTheEpoch(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
	e.TokensAt(t0, "") // sets the epoch
	d := e.AllowAt(at(-10*time.Second), "k", 1)
	if !d.Allowed || d.ResetAfter != time.Second {
		t.Errorf("AllowAt(-10 s) = %+v, want allowed, ResetAfter 1s", d)
	}
	if got := e.TokensAt(at(-9*time.Second), "k"); got != 1 {
		t.Errorf("tokens at -9 s = %v, want 1", got)
	}
}

// A capacity eviction scan that finds no bucket at all, because every live
// count is a reservation not yet inserted, used to record "no bucket fills
// before the end of time" and so stopped all later capacity evictions: new
// keys overflowed although full buckets could go.
func TestEmptyEvictionScanDoesNotStopEvictions(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 1, MaxKeys: 1})
	release := engine.HoldReservation(e)
	if d := e.AllowAt(t0, "a", 1); !d.Allowed || e.Len() != 1 || e.Stats().Overflow != 1 {
		t.Fatalf("with the table full of a reservation: %+v, %+v; want admitted unstored", d, e.Stats())
	}
	release()
	e.AllowAt(t0, "b", 1) // the one bucket, full again at 1 s
	if d := e.AllowAt(at(time.Second), "c", 1); !d.Allowed || e.Stats().Evicted != 1 || e.Stats().Overflow != 1 {
		t.Errorf("new key with a full bucket to evict: %+v, %+v; want b evicted, c stored", d, e.Stats())
	}
	if d := e.AllowAt(at(time.Second), "c", 1); d.Allowed {
		t.Errorf("c has no bucket: second take %+v, want denied", d)
	}
}

// A wait that does not fit a Duration (a caller at -146 years, a bucket
// stamped at +146 years) saturates; it used to wrap and come out as 0, an
// invitation to retry at once.
func TestWaitsSaturate(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 2})
	e.TokensAt(t0, "") // sets the epoch
	far := time.Duration(1 << 62)
	e.AllowAt(at(far), "k", 2)
	d := e.AllowAt(at(-far), "k", 1)
	if d.Allowed || d.RetryAfter != engine.InfDuration-1 || d.ResetAfter != engine.InfDuration-1 {
		t.Errorf("AllowAt(-2^62 ns) after a take at +2^62 ns = %+v, want denied, both waits InfDuration-1", d)
	}
}

// A new bucket used to be stamped at its creator's time. A caller with an
// earlier time whose take landed on it before the creator's own take was then
// decided at the creator's time, withholding the refill in between: an
// outcome no order of the two calls gives (found by TestLinearizable, with a
// sweep between the calls). The bucket is now stamped no later than the
// shard's last eviction, so the earlier caller is decided at its own time.
func TestNewBucketIsNotStampedAtItsCreatorsTime(t *testing.T) {
	e, err := engine.New(engine.Config{Limit: 1000, Burst: 5, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	base := time.Unix(1_700_000_000, 0)
	at := func(us int64) time.Time { return base.Add(time.Duration(us) * time.Microsecond) }

	// Never seen: the creator reads 1000 µs, an earlier caller 900 µs.
	e.TokensAt(at(0), "") // the epoch
	e.CreateAt(at(1000), "k")
	d := e.AllowAt(at(900), "k", 1)
	if !d.Allowed || d.Remaining != 4 || d.ResetAfter != time.Millisecond {
		t.Fatalf("take at 900 µs on a bucket created at 1000 µs: %+v, want allowed, 4 left, full again 1 ms later", d)
	}
	if got := e.TokensAt(at(1400), "k"); got != 4.5 {
		t.Fatalf("tokens at 1400 µs = %v, want 4.5 (refill counted from 900 µs)", got)
	}

	// After an eviction at 20000 µs: a bucket created at 20050 µs and a
	// take from 19980 µs is decided at the eviction, not at 20050 µs.
	if n := e.SweepAt(at(20000)); n != 1 {
		t.Fatalf("sweep evicted %d buckets, want 1", n)
	}
	e.CreateAt(at(20050), "k")
	d = e.AllowAt(at(19980), "k", 0.323)
	if !d.Allowed || d.Remaining != 4.677 || d.ResetAfter != 323*time.Microsecond+20*time.Microsecond {
		t.Fatalf("take at 19980 µs after an eviction at 20000 µs: %+v, want 4.677 left, full again at 20323 µs", d)
	}
	if got := e.TokensAt(at(20100), "k"); got != 4.777 {
		t.Fatalf("tokens at 20100 µs = %v, want 4.777 (refill counted from the eviction)", got)
	}
}

// A new bucket is full from its shard's last eviction (or the overflow
// bucket's), so a caller with an older time is decided as at the eviction.
// The eviction's tick was packed into the new word without raising the
// reference tick; a sweep far ahead of the last write (more than Horizon/8,
// 8.6 s at burst 1e6) made the word resolve a horizon early, and the caller
// was decided at its own, earlier time: a drained bucket refilled from
// before the eviction.
func TestNewBucketAfterAFarSweepKeepsItsStamp(t *testing.T) {
	for _, gap := range []time.Duration{6 * time.Second, 14 * time.Second, 20 * time.Second} {
		t.Run(fmt.Sprintf("table/gap=%v", gap), func(t *testing.T) {
			e := newEngine(t, engine.Config{Limit: 1000, Burst: 1e6, Shards: 1, SweepInterval: -1})
			e.AllowAt(t0, "k", 1)
			if n := e.SweepAt(at(gap)); n != 1 {
				t.Fatalf("evicted %d, want 1", n)
			}
			if d := e.AllowAt(at(gap/2), "k", 1e6); !d.Allowed {
				t.Fatalf("late caller: %+v, want the full new bucket", d)
			}
			if d := e.AllowAt(at(gap), "k", 1000); d.Allowed {
				t.Errorf("drained at %v (the eviction), 1000 tokens at %v: %+v, want denied", gap, gap, d)
			}
		})
		t.Run(fmt.Sprintf("overflow/gap=%v", gap), func(t *testing.T) {
			e := newEngine(t, engine.Config{Limit: 1000, Burst: 1e6, MaxKeys: 1, Shards: 1, SweepInterval: -1})
			e.AllowAt(t0, "resident", 1e6) // the table stays full for 1000 s
			e.AllowAt(t0, "a", 1)          // the overflow bucket, full again after 1 ms
			e.SweepAt(at(gap))
			if d := e.AllowAt(at(gap/2), "b", 1e6); !d.Allowed {
				t.Fatalf("late caller: %+v, want the full new overflow bucket", d)
			}
			if d := e.AllowAt(at(gap), "c", 1000); d.Allowed {
				t.Errorf("drained at %v (the eviction), 1000 tokens at %v: %+v, want denied", gap, gap, d)
			}
		})
	}
}

// A clock jump, or a sweeper that falls behind, must never withhold tokens.
// An idle key's word used to resolve against a reference tick that other
// keys moved: after a key "busy" took at t0+jump, key "idle", drained at t0,
// read 132.9 tokens where the exact bucket holds 18,000 (burst 1e5, 30 min),
// 387.8 where it holds 1,000,000 (burst 1e6, 30 days). A bucket's word now
// resolves against its own epoch.
func TestClockJumpsKeepIdleBucketsExact(t *testing.T) {
	jumps := []time.Duration{time.Minute, 30 * time.Minute, 30 * time.Hour, 30 * 24 * time.Hour, 366 * 24 * time.Hour, 100 * 366 * 24 * time.Hour}
	for _, c := range []struct{ burst, rate float64 }{{1, 10}, {50, 10}, {1e5, 10}, {1e6, 10}, {1e9, 1000}} {
		for _, jump := range jumps {
			for _, sweep := range []bool{false, true} {
				t.Run(fmt.Sprintf("burst=%g/jump=%v/sweep=%v", c.burst, jump, sweep), func(t *testing.T) {
					e := newEngine(t, engine.Config{Limit: engine.Limit(c.rate), Burst: c.burst, Shards: 1, SweepInterval: -1})
					e.AllowAt(t0, "idle", c.burst)
					e.AllowAt(t0, "busy", 1)
					if sweep {
						e.SweepAt(at(jump / 2)) // evicts the full busy bucket, leaves idle
					}
					e.AllowAt(at(jump), "busy", 1)
					exact := min(c.burst, c.rate*jump.Seconds())
					// The documented rounding bound (docs/guarantees.md, The model).
					tickRefill := c.rate * e.Precision().Tick.Seconds()
					slack := 0.002 + max(0.001, tickRefill) + 3*tickRefill
					if got := e.TokensAt(at(jump), "idle"); got > exact || exact-got >= slack {
						t.Errorf("idle holds %v, exact %v (slack %v)", got, exact, slack)
					}
					take := math.Floor((exact-slack)*1000) / 1000
					if d := e.AllowAt(at(jump), "idle", take); !d.Allowed {
						t.Errorf("taking %v of the exact %v tokens: %+v", take, exact, d)
					}
				})
			}
		}
	}
}
