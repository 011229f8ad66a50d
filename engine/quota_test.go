package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

func newQuota(t testing.TB, cfg engine.QuotaConfig) *engine.Quota {
	t.Helper()
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	q, err := engine.NewQuota(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// A key takes its quota in a period, is denied until the period ends with
// the exact wait, and gets the whole quota back when the next begins.
func TestQuotaRenews(t *testing.T) {
	q := newQuota(t, engine.QuotaConfig{Quota: 3, Calendar: engine.Calendar{Period: engine.Monthly}})
	at := utc("2026-11-29T12:00:00Z")
	for i := range 3 {
		if d := q.TakeAt(at, "k", 1, nil); !d.Allowed || d.Remaining != float64(2-i) {
			t.Fatalf("take %d: %+v", i, d)
		}
	}
	d := q.TakeAt(at, "k", 1, nil)
	renewal := utc("2026-12-01T00:00:00Z")
	if d.Allowed || d.RetryAfter != renewal.Sub(at) || d.Remaining != 0 {
		t.Fatalf("4th take: %+v, want denied until %v", d, renewal)
	}
	if d := q.TakeAt(renewal.Add(-time.Nanosecond), "k", 1, nil); d.Allowed {
		t.Fatalf("a nanosecond before the renewal: %+v", d)
	}
	if d := q.TakeAt(renewal, "k", 3, nil); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("at the renewal: %+v, want the whole quota", d)
	}
	if d := q.TakeAt(at, "k", 4, nil); d.Allowed || d.RetryAfter != engine.InfDuration {
		t.Fatalf("a cost above the quota: %+v", d)
	}
}

// A clock that steps back stays in the period it was in, and a key whose
// calendar changes keeps what it took until its period ends.
func TestQuotaClockBackAndAnchorChange(t *testing.T) {
	q := newQuota(t, engine.QuotaConfig{Quota: 2, Calendar: engine.Calendar{Period: engine.Monthly}})
	dec := utc("2026-12-01T00:00:00Z")
	q.TakeAt(dec, "k", 2, nil)
	// Back into November: still December's period, used up.
	if d := q.TakeAt(dec.Add(-time.Hour), "k", 1, nil); d.Allowed || d.RetryAfter != 31*24*time.Hour+time.Hour {
		t.Fatalf("clock back an hour: %+v, want December's period, used", d)
	}
	// The billing day moves to the 15th: December's takes stand until
	// January 1st, then the period runs to January 15th.
	billing := &engine.Calendar{Period: engine.Monthly, Day: 15}
	if d := q.TakeAt(utc("2026-12-20T00:00:00Z"), "k", 1, billing); d.Allowed {
		t.Fatalf("after the anchor moved: %+v, want the period in force, used", d)
	}
	d := q.TakeAt(utc("2027-01-01T00:00:00Z"), "k", 1, billing)
	if !d.Allowed || d.ResetAfter != 14*24*time.Hour {
		t.Fatalf("January 1st: %+v, want a period to January 15th", d)
	}
}

// A rule's token bucket and its quota are taken together or not at all.
func TestQuotaTakeAllWithAnEngine(t *testing.T) {
	q := newQuota(t, engine.QuotaConfig{Quota: 5, Calendar: engine.Calendar{Period: engine.Daily}})
	e, err := engine.New(engine.Config{Limit: 1, Burst: 2, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	at := utc("2026-11-29T12:00:00Z")
	takes := []engine.Take{{Limiter: e, Key: "k", N: 1}, {Limiter: q, Key: "k", N: 1}}
	out := make([]engine.Decision, 2)
	for i := range 2 {
		if denied, err := e.TakeAllAt(at, takes, out); denied != -1 || err != nil {
			t.Fatalf("call %d: denied %d, %v", i, denied, err)
		}
	}
	// The bucket is empty: the quota gives back what it took.
	denied, err := q.TakeAllAt(at, takes, out)
	if denied != 0 || err != nil || out[1].Remaining != 3 || out[1].Allowed {
		t.Fatalf("bucket empty: denied %d %v %+v, want the bucket's denial and 3 left in the quota", denied, err, out)
	}
	// A day of refill later the quota runs out first: the bucket keeps
	// its tokens.
	at = at.Add(3 * time.Second)
	q.TakeAt(at, "k", 3, nil)
	denied, _ = e.TakeAllAt(at, takes, out)
	if denied != 1 || out[0].Allowed || e.TokensAt(at, "k") != 2 {
		t.Fatalf("quota used up: denied %d %+v, bucket %v; want the quota's denial and a full bucket", denied, out, e.TokensAt(at, "k"))
	}
	if st := q.Stats(); st.Allowed != 3 || st.Denied != 2 {
		t.Errorf("quota stats %+v, want 3 allowed, 2 denied", st)
	}
}

// Concurrent takes on one key never take more than the quota.
func TestQuotaConcurrent(t *testing.T) {
	q := newQuota(t, engine.QuotaConfig{Quota: 1000, Calendar: engine.Calendar{Period: engine.Weekly}})
	at := utc("2026-11-29T12:00:00Z")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 400 {
				if q.TakeAt(at, "k", 1, nil).Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 1000 {
		t.Errorf("admitted %d, want exactly the quota, 1000", admitted.Load())
	}
}

// With MaxKeys live and no period ended, a new key shares the overflow
// quota (FullShare) or is denied (FullDeny); a key whose period ended
// makes room.
func TestQuotaMaxKeys(t *testing.T) {
	at := utc("2026-11-29T12:00:00Z")
	deny := newQuota(t, engine.QuotaConfig{Quota: 2, Calendar: engine.Calendar{Period: engine.Daily}, MaxKeys: 2, OnFull: engine.FullDeny})
	deny.TakeAt(at, "a", 1, nil)
	deny.TakeAt(at, "b", 1, nil)
	if d := deny.TakeAt(at, "c", 1, nil); d.Allowed || d.RetryAfter != 12*time.Hour {
		t.Fatalf("FullDeny: %+v, want denied until a period ends", d)
	}
	if d := deny.TakeAt(at.Add(12*time.Hour), "c", 1, nil); !d.Allowed || deny.Len() != 2 {
		t.Fatalf("after a period ended: %+v, %d keys", d, deny.Len())
	}
	share := newQuota(t, engine.QuotaConfig{Quota: 2, Calendar: engine.Calendar{Period: engine.Daily}, MaxKeys: 1})
	share.TakeAt(at, "a", 1, nil)
	admitted := 0
	for _, k := range []string{"b", "c", "d", "e"} {
		if share.TakeAt(at, k, 1, nil).Allowed {
			admitted++
		}
	}
	if admitted != 2 || share.Stats().Overflow != 4 {
		t.Errorf("FullShare: %d of 4 new keys admitted, overflow %d; want 2 (one shared quota), 4", admitted, share.Stats().Overflow)
	}
}

// A sweep removes the keys whose period ended; a clock stepping back into
// a removed period finds it used up.
func TestQuotaSweep(t *testing.T) {
	q := newQuota(t, engine.QuotaConfig{Quota: 1, Calendar: engine.Calendar{Period: engine.Daily}, Shards: 1})
	at := utc("2026-11-29T12:00:00Z")
	q.TakeAt(at, "a", 1, nil)
	q.TakeAt(at.Add(24*time.Hour), "b", 1, nil)
	if n := q.SweepAt(at.Add(24 * time.Hour)); n != 1 || q.Len() != 1 {
		t.Fatalf("swept %d, %d left; want a's period gone, b's kept", n, q.Len())
	}
	if d := q.TakeAt(at, "a", 1, nil); d.Allowed {
		t.Fatalf("back in a's removed period: %+v, want it used up", d)
	}
}

func TestQuotaAllocations(t *testing.T) {
	q := newQuota(t, engine.QuotaConfig{Quota: 1e9, Calendar: engine.Calendar{Period: engine.Monthly}})
	e, _ := engine.New(engine.Config{Limit: 1e9, Burst: 1e9, SweepInterval: -1})
	defer e.Close()
	at := utc("2026-11-29T12:00:00Z")
	q.TakeAt(at, "k", 1, nil)
	if n := testing.AllocsPerRun(100, func() { q.TakeAt(at, "k", 1, nil) }); n != 0 {
		t.Errorf("TakeAt on an existing key: %v allocations", n)
	}
	takes := []engine.Take{{Limiter: e, Key: "k", N: 1}, {Limiter: q, Key: "k", N: 1}}
	out := make([]engine.Decision, 2)
	e.TakeAllAt(at, takes, out)
	if n := testing.AllocsPerRun(100, func() { e.TakeAllAt(at, takes, out) }); n != 0 {
		t.Errorf("TakeAllAt of a bucket and a quota: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { q.Take(context.Background(), "k", 1) }); n != 0 {
		t.Errorf("Take: %v allocations", n)
	}
}

// Every field out of range is named.
func TestQuotaConfigErrors(t *testing.T) {
	_, err := engine.NewQuota(engine.QuotaConfig{Quota: 0.0005, Calendar: engine.Calendar{Period: engine.Monthly, Day: 40},
		Shards: 3, MaxKeys: -1, SweepInterval: time.Microsecond})
	if !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"Quota must be between 0.001 and 1e9", "Day must be between 1 and 31", "Shards", "MaxKeys", "SweepInterval"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
	if _, err := engine.NewQuota(engine.QuotaConfig{Quota: 1e9 + 1, Calendar: engine.Calendar{Period: engine.Daily}}); err == nil {
		t.Error("a quota above 1e9 was accepted")
	}
}

// SetQuota keeps what each key took: a lowered quota denies a key that
// took more, until its period ends; a new calendar begins the next period.
func TestQuotaSetQuota(t *testing.T) {
	q := newQuota(t, engine.QuotaConfig{Quota: 10, Calendar: engine.Calendar{Period: engine.Monthly}})
	at := utc("2026-11-29T12:00:00Z")
	q.TakeAt(at, "k", 6, nil)
	if err := q.SetQuota(5, engine.Calendar{Period: engine.Monthly, Day: 15}); err != nil {
		t.Fatal(err)
	}
	if d := q.TakeAt(at, "k", 1, nil); d.Allowed || d.Remaining != 0 || d.RetryAfter != utc("2026-12-01T00:00:00Z").Sub(at) {
		t.Fatalf("after lowering the quota: %+v, want denied to the end of the period in force", d)
	}
	d := q.TakeAt(utc("2026-12-01T00:00:00Z"), "k", 5, nil)
	if !d.Allowed || d.ResetAfter != 14*24*time.Hour || q.Burst() != 5 {
		t.Fatalf("next period: %+v (burst %v), want 5 to December 15th", d, q.Burst())
	}
	if err := q.SetQuota(0, engine.Calendar{Period: engine.Monthly, Day: 32}); err == nil || !strings.Contains(err.Error(), "Day") ||
		!strings.Contains(err.Error(), "Quota") || q.Burst() != 5 {
		t.Fatalf("bad SetQuota: %v, burst %v", err, q.Burst())
	}
}

// An engine pool opens a Quota for a Spec with a Calendar, shares it
// between Binds of its ID, and never shares it with a token bucket.
func TestPoolBindsQuotas(t *testing.T) {
	p := engine.NewEnginePool(engine.Config{SweepInterval: -1})
	defer p.Close()
	spec := engine.QuotaSpec("month#1", "month", 100, engine.Calendar{Period: engine.Monthly})
	a, err := p.Bind(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.(*engine.Quota); !ok || a.Burst() != 100 {
		t.Fatalf("bound %T, burst %v", a, a.Burst())
	}
	spec.Burst = 200
	if b, err := p.Bind(spec); err != nil || b != a {
		t.Fatalf("rebinding with another quota: %v, same %v; want the same Quota, retuned by the caller", err, b == a)
	}
	tb, err := p.Bind(engine.Spec{ID: "month#1", Name: "month", Limit: 1, Burst: 1})
	if err != nil || tb == a {
		t.Fatalf("a token bucket of the same ID: %v, shared %v", err, tb == a)
	}
	bad := engine.QuotaSpec("x#1", "x", 0, engine.Calendar{Period: engine.Daily, Hour: 30})
	if _, err := p.Bind(bad); err == nil || !strings.Contains(err.Error(), "Hour") {
		t.Fatalf("a bad quota: %v", err)
	}
}
