package engine_test

import (
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
