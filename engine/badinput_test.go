package engine_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// The library API's bad inputs, one subtest per kind, each with the exact
// outcome. Where a choice was open it is made here and in the docs:
//
//   - A rate of 0 is an error, not "burst only" nor "deny all"; +Inf is an
//     error, not "unlimited" (a caller that wants no limit need not call).
//   - An invalid cost (negative, NaN, infinite, above the burst) is not an
//     error value but a denial with RetryAfter == InfDuration that changes
//     nothing: Allow and AllowN have no error result, and a denial is the
//     safe reading of a nonsensical request. -0 is 0, a peek.
//   - The empty key is a key like any other.
//   - Keys of any length are accepted and stored whole (truncating would
//     merge keys); a key costs its length plus 10 bytes, rounded up to the
//     allocator's size class, while its bucket lives, and MaxKeys bounds the
//     number of buckets. Capping key length is the job of whatever derives
//     keys from untrusted input.
//   - After Close every method works as before; only the background sweeper
//     is gone.
//
// 64-bit atomics on 32-bit platforms are proven by running this package with
// GOARCH=386 in CI.

// badConfig is one constructor row: the config and New's exact error.
type badConfig struct {
	name string
	cfg  engine.Config
	want string
}

func TestBadInputConfig(t *testing.T) {
	const limitErr = "engine: invalid config: Limit must be between 1/31622400 (one token per 366 days) and 1e9 tokens per second, got "
	const burstErr = "engine: invalid config: Burst must be between 1 and 1e9 tokens, got "
	for _, tt := range []badConfig{
		{"rate=0", engine.Config{Limit: 0, Burst: 1}, limitErr + "0"},
		{"rate<0", engine.Config{Limit: -1, Burst: 1}, limitErr + "-1"},
		{"rate=NaN", engine.Config{Limit: engine.Limit(math.NaN()), Burst: 1}, limitErr + "NaN"},
		{"rate=-Inf", engine.Config{Limit: engine.Limit(math.Inf(-1)), Burst: 1}, limitErr + "-Inf"},
		{"rate=+Inf", engine.Config{Limit: engine.Every(0), Burst: 1}, limitErr + "+Inf"},
		{"rate=MaxFloat64", engine.Config{Limit: math.MaxFloat64, Burst: 1}, limitErr + "1.7976931348623157e+308"},
		{"rate=below one per 366 days", engine.Config{Limit: 1.0 / 31622401, Burst: 1}, limitErr + "3.162315220782887e-08"},
		{"rate=above 1e9", engine.Config{Limit: 1e9 + 1, Burst: 1}, limitErr + "1.000000001e+09"},
		{"fill time=366 days + 1 s", engine.Config{Limit: 1, Burst: 31622401},
			"engine: invalid config: Burst/Limit must be at most 366 days (31622400 s), the time to refill an empty bucket, got 3.1622401e+07 s"},
		{"burst=0", engine.Config{Limit: 1, Burst: 0}, burstErr + "0"},
		{"burst<0", engine.Config{Limit: 1, Burst: -1}, burstErr + "-1"},
		{"burst=1e9+0.001", engine.Config{Limit: 1e9, Burst: 1e9 + 0.001}, burstErr + "1.000000000001e+09"},
		{"burst=2^53", engine.Config{Limit: 1e9, Burst: 1 << 53}, burstErr + "9.007199254740992e+15"},
		{"burst=NaN", engine.Config{Limit: 1, Burst: math.NaN()}, burstErr + "NaN"},
		{"OnFull=7", engine.Config{Limit: 1, Burst: 1, OnFull: 7}, "engine: invalid config: OnFull must be FullShare or FullDeny, got 7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := engine.New(tt.cfg)
			if err == nil {
				e.Close()
				t.Fatalf("New(%+v) succeeded", tt.cfg)
			}
			if !errors.Is(err, engine.ErrInvalidConfig) || err.Error() != tt.want {
				t.Errorf("New(%+v) = %q, want %q wrapping ErrInvalidConfig", tt.cfg, err, tt.want)
			}
		})
	}
	// The edges of the domain are accepted.
	for _, cfg := range []engine.Config{
		{Limit: 1.0 / 31622400, Burst: 1},
		{Limit: 1.0 / 86400, Burst: 365},
		{Limit: 1, Burst: 31622400},
		{Limit: 1e9, Burst: 1e9},
	} {
		e, err := engine.New(cfg)
		if err != nil {
			t.Errorf("New(%+v) = %v, want accepted", cfg, err)
			continue
		}
		e.Close()
	}
}

// never is the decision for a cost no bucket can pay, on a bucket holding
// remaining tokens that is full again after reset.
func never(remaining float64, reset time.Duration) engine.Decision {
	return engine.Decision{Remaining: remaining, RetryAfter: engine.InfDuration, ResetAfter: reset}
}

func TestBadInputCost(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 10})
	e.AllowAt(t0, "k", 4) // 6 tokens at 0 s
	now := at(time.Second)
	for _, tt := range []struct {
		name string
		cost float64
		want engine.Decision
	}{
		{"cost=0", 0, engine.Decision{Allowed: true, Remaining: 7, ResetAfter: 3 * time.Second}},
		{"cost=-0", math.Copysign(0, -1), engine.Decision{Allowed: true, Remaining: 7, ResetAfter: 3 * time.Second}},
		{"cost<0", -1, never(7, 3*time.Second)},
		{"cost=-0.001", -0.001, never(7, 3*time.Second)},
		{"cost=-Inf", math.Inf(-1), never(7, 3*time.Second)},
		{"cost=NaN", math.NaN(), never(7, 3*time.Second)},
		{"cost=+Inf", math.Inf(1), never(7, 3*time.Second)},
		{"cost=burst+0.001", 10.001, never(7, 3*time.Second)},
		{"cost=2*burst", 20, never(7, 3*time.Second)},
		{"cost=MaxFloat64", math.MaxFloat64, never(7, 3*time.Second)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.AllowAt(now, "k", tt.cost); got != tt.want {
				t.Errorf("AllowAt(1 s, k, %v) = %+v, want %+v", tt.cost, got, tt.want)
			}
			// Nothing changed: the bucket still holds 7 tokens at 1 s and
			// refills from 0 s, not from this call.
			if got := e.TokensAt(now, "k"); got != 7 {
				t.Errorf("tokens after = %v, want 7", got)
			}
			if got := e.TokensAt(at(1500*time.Millisecond), "k"); got != 7.5 {
				t.Errorf("tokens half a second later = %v, want 7.5", got)
			}
			// On a key without a bucket: the same, and no bucket is made.
			if got := e.AllowAt(now, "new", tt.cost); got.Allowed != tt.want.Allowed || got.Remaining != 10 || e.Len() != 1 {
				t.Errorf("on a new key: %+v, Len %d; want allowed=%v, Remaining 10, Len 1", got, e.Len(), tt.want.Allowed)
			}
		})
	}
	// A cost that is not a multiple of 0.001 is rounded up, never down: a
	// sliver of a token is charged a whole quantum, not waved through.
	t.Run("cost=0.0005", func(t *testing.T) {
		if d := e.AllowAt(now, "k", 0.0005); !d.Allowed || d.Remaining != 6.999 {
			t.Errorf("AllowAt(0.0005) = %+v, want allowed with 6.999 left", d)
		}
	})
}

func TestBadInputKey(t *testing.T) {
	t.Run("key=empty", func(t *testing.T) {
		e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
		keys := []string{"", "\x00", " ", "\x00\x00"}
		for _, k := range keys[1:] {
			e.AllowAt(t0, k, 1)
		}
		if d := e.AllowAt(t0, "", 1); !d.Allowed || e.Len() != len(keys) {
			t.Errorf(`AllowAt("") = %+v, Len %d: the empty key aliases another`, d, e.Len())
		}
		if d := e.AllowAt(t0, "", 1); d.Allowed || d.RetryAfter != time.Second {
			t.Errorf(`second AllowAt("") = %+v, want denied for 1s`, d)
		}
	})
	t.Run("key=1 MiB", func(t *testing.T) {
		e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
		long := strings.Repeat("k", 1<<20)
		if !e.AllowAt(t0, long, 1).Allowed {
			t.Fatal("first take on a 1 MiB key denied")
		}
		// Stored whole: its prefixes and a one-byte change are other keys.
		for _, other := range []string{long[:len(long)-1], long[:256], long[:len(long)-1] + "x"} {
			if !e.AllowAt(t0, other, 1).Allowed {
				t.Errorf("key of %d bytes aliases the 1 MiB key", len(other))
			}
		}
		if e.AllowAt(t0, long, 1).Allowed {
			t.Error("the 1 MiB key was not drained")
		}
		// A digest is stored in its place, and no key stored as it is can
		// name that digest: the digest's bytes, as a key, are another key.
		if !e.AllowAt(t0, engine.BoundedKey(long), 1).Allowed {
			t.Error("the digest of the 1 MiB key, used as a key, aliases it")
		}
	})
	t.Run("key=1 MiB each, many", func(t *testing.T) {
		// A client that sends megabyte keys gets buckets of the usual size:
		// 200 live keys of 1 MiB must not hold 200 MiB.
		e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
		const n = 200
		buf := []byte(strings.Repeat("k", 1<<20))
		before := heapInUse()
		for i := range n {
			copy(buf, fmt.Sprintf("%08d", i))
			if !e.AllowAt(t0, string(buf), 1).Allowed {
				t.Fatalf("key %d denied", i)
			}
		}
		after := heapInUse()
		if e.Len() != n {
			t.Fatalf("Len %d, want %d", e.Len(), n)
		}
		if grown := int64(after) - int64(before); grown > n*1024 {
			t.Errorf("heap grew by %d bytes for %d live keys of 1 MiB: keys are stored whole", grown, n)
		}
		// Each is still its own bucket.
		copy(buf, fmt.Sprintf("%08d", 7))
		if e.AllowAt(t0, string(buf), 1).Allowed {
			t.Error("key 7 was not drained")
		}
		runtime.KeepAlive(buf)
	})
}

func TestBadInputTime(t *testing.T) {
	t.Run("time=before last update", func(t *testing.T) {
		e := newEngine(t, engine.Config{Limit: 1, Burst: 2})
		e.AllowAt(at(10*time.Second), "k", 2)
		// At 5 s, as at 10 s: empty, a token at 11 s (6 s after 5 s).
		if d := e.AllowAt(at(5*time.Second), "k", 1); d.Allowed || d.Remaining != 0 || d.RetryAfter != 6*time.Second {
			t.Errorf("AllowAt(5 s) = %+v, want denied, RetryAfter 6s", d)
		}
		if got := e.TokensAt(at(10500*time.Millisecond), "k"); got != 0.5 {
			t.Errorf("tokens at 10.5 s = %v, want 0.5: the early call moved the bucket", got)
		}
	})
	t.Run("time=zero Time", func(t *testing.T) {
		// time.Time{} is year 1: as the first time it is the epoch, and a
		// virtual clock may start there.
		e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
		zero := time.Time{}
		if !e.AllowAt(zero, "k", 1).Allowed || e.AllowAt(zero.Add(999*time.Millisecond), "k", 1).Allowed || !e.AllowAt(zero.Add(time.Second), "k", 1).Allowed {
			t.Error("a clock starting at time.Time{} does not refill one token per second")
		}
	})
	t.Run("time=far past", func(t *testing.T) {
		// Epoch in 2026; a call at year 1 is clamped to -2^62 ns (-146
		// years). The new key's bucket starts full, so the call is allowed,
		// but a stamp that far behind every other lies outside the packed
		// timestamp's horizon and resolves later than the truth, within
		// Horizon/8 of the epoch (documented in package fixedpoint): the
		// refill may be withheld that long, never granted early.
		e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
		epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		e.TokensAt(epoch, "")
		if d := e.AllowAt(time.Time{}, "k", 1); !d.Allowed || d.Remaining != 0 {
			t.Errorf("AllowAt(year 1) = %+v, want allowed with 0 left", d)
		}
		if got := e.TokensAt(epoch, "k"); got > 1 {
			t.Errorf("tokens at the epoch = %v, more than the burst", got)
		}
		if got := e.TokensAt(epoch.Add(e.Precision().Horizon/8+2*time.Second), "k"); got != 1 {
			t.Errorf("tokens Horizon/8 + 2 s after the epoch = %v, want full", got)
		}
	})
	t.Run("time=far future", func(t *testing.T) {
		// A call at +2^63-1 ns is clamped to +2^62 ns; the bucket is full
		// there, the take is stamped at the grid's next whole quantum,
		// 4611686018428000000 ns, and later calls at normal times count as
		// at that stamp (they never pull it back).
		e := newEngine(t, engine.Config{Limit: 1, Burst: 2})
		e.TokensAt(t0, "")
		if d := e.AllowAt(at(math.MaxInt64), "k", 1); !d.Allowed || d.Remaining != 1 {
			t.Errorf("AllowAt(+2^63-1 ns) = %+v, want allowed with 1 left", d)
		}
		if d := e.AllowAt(at(time.Second), "k", 1); !d.Allowed || d.Remaining != 0 {
			t.Errorf("AllowAt(1 s) after = %+v, want allowed with 0 left", d)
		}
		const stamp = 4611686018428000000
		if d := e.AllowAt(at(time.Second), "k", 1); d.Allowed || d.RetryAfter != stamp {
			t.Errorf("AllowAt(1 s) again = %+v, want denied with RetryAfter %d ns (one second after the stamp)", d, int64(stamp))
		}
	})
	t.Run("time=non-monotonic", func(t *testing.T) {
		// Alternating early and late times (golang/go#56287): the early
		// ones count as the late ones, so they never mint tokens.
		e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
		var got []bool
		for _, s := range []time.Duration{0, 1, 0, 1, 0, 2, 1, 2, 1, 3} {
			got = append(got, e.AllowAt(at(s*time.Second), "k", 1).Allowed)
		}
		want := []bool{true, true, false, false, false, true, false, false, false, true}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("admissions %v, want %v", got, want)
			}
		}
	})
}

func TestBadInputUseAfterClose(t *testing.T) {
	before := sweepers()
	e, err := engine.New(engine.Config{Limit: 1, Burst: 2, SweepInterval: time.Millisecond, MaxKeys: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if d := e.AllowAt(t0, "k", 2); !d.Allowed || d.Remaining != 0 {
		t.Errorf("AllowAt after Close = %+v", d)
	}
	if d := e.AllowAt(at(500*time.Millisecond), "k", 1); d.Allowed || d.RetryAfter != 500*time.Millisecond {
		t.Errorf("denial after Close = %+v", d)
	}
	if !e.Allow("other") || e.AllowN("other", 1).Allowed != true || e.TokensAt(t0, "k") != 0 {
		t.Error("Allow, AllowN or TokensAt misbehave after Close")
	}
	if n := e.SweepAt(time.Now().Add(time.Hour)); n != 2 || e.Len() != 0 {
		t.Errorf("SweepAt after Close evicted %d, Len %d; want 2, 0", n, e.Len())
	}
	if s := e.Stats(); s.Allowed != 3 || s.Denied != 1 || s.Evicted != 2 {
		t.Errorf("Stats after Close = %+v", s)
	}
	// Close waited for the sweeper to return; its goroutine may still be on
	// its way out.
	for deadline := time.Now().Add(5 * time.Second); sweepers() > before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := sweepers(); n > before {
		t.Errorf("%d sweepers after Close, %d before: Close restarted or leaked one", n, before)
	}
}
