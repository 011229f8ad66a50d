package redisstore

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests' zones, whatever the machine has

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// The tests of calendar quotas run takes at the server's time. Periods
// are days and longer, so the calendars they use are anchored at least
// eleven hours from now, where no period ends while a test runs; the tests
// of a period's end inject the instance's bounds instead (remote.Quota.BoundsFor).

// farHour is an hour of loc's clock that is at least eleven hours from now.
func farHour(loc *time.Location) int { return (time.Now().In(loc).Hour() + 12) % 24 }

// bindQuota binds a quota of n per period of cal on store, as ID id.
func bindQuota(t *testing.T, store *Store, id string, n float64, cal engine.Calendar) *Quota {
	t.Helper()
	l, err := store.Bind(engine.QuotaSpec(id, id, n, cal))
	if err != nil {
		t.Fatal(err)
	}
	q, ok := l.(*Quota)
	if !ok {
		t.Fatalf("Bind of a quota Spec returned a %T, want a *Quota", l)
	}
	return q
}

// serverMillis is the server's clock, in Unix milliseconds.
func serverMillis(t *testing.T, addr string) int64 {
	t.Helper()
	v := admin(t, addr, "TIME").([]any)
	s, _ := strconv.ParseInt(v[0].(string), 10, 64)
	us, _ := strconv.ParseInt(v[1].(string), 10, 64)
	return s*1000 + us/1000
}

// A script of takes, alone and in TakeAlls, with per-take calendars, costs
// that peek, fit, deny and can never pass, and quotas changed on the way,
// gets from the store exactly the Decisions an engine.Quota gives at the
// server's times.
func TestQuotaEquivalence(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	ny, _ := time.LoadLocation("America/New_York")
	london, _ := time.LoadLocation("Europe/London")
	own := engine.Calendar{Period: engine.Daily, Hour: farHour(time.UTC)}
	q := bindQuota(t, store, "eq", 5, own)
	ref, err := engine.NewQuota(engine.QuotaConfig{Quota: 5, Calendar: own, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	cals := []*engine.Calendar{nil,
		{Period: engine.Monthly, Day: 15, Hour: farHour(ny), Location: ny},
		{Period: engine.Weekly, Weekday: 7, Hour: farHour(london), Location: london},
		{Period: engine.Yearly, Month: 7, Day: 31, Hour: farHour(time.UTC)}}
	costs := []float64{0, 0.001, 1, 1, 2.5, 5, 6, -1, math.NaN()}
	keys := []string{"a", "b", "c"}
	quotas := []struct {
		n   float64
		cal engine.Calendar
	}{{5, own}, {3, own}, {8, engine.Calendar{Period: engine.Weekly, Hour: farHour(time.UTC)}}}
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for op := range 300 {
		key := keys[rng.IntN(len(keys))]
		cal := cals[rng.IntN(len(cals))]
		n := costs[rng.IntN(len(costs))]
		var takes, refTakes []engine.Take
		switch k := rng.IntN(10); {
		case k == 0:
			c := quotas[rng.IntN(len(quotas))]
			if err := q.SetQuota(c.n, c.cal); err != nil {
				t.Fatal(err)
			}
			if err := ref.SetQuota(c.n, c.cal); err != nil {
				t.Fatal(err)
			}
			continue
		case k < 7:
			takes = []engine.Take{{Limiter: q, Key: key, N: n, Calendar: cal}}
			refTakes = []engine.Take{{Limiter: ref, Key: key, N: n, Calendar: cal}}
		default:
			// One key twice: one slot, one script.
			m := costs[rng.IntN(len(costs))]
			other := cals[rng.IntN(len(cals))]
			takes = []engine.Take{{Limiter: q, Key: key, N: n, Calendar: cal}, {Limiter: q, Key: key, N: m, Calendar: other}}
			refTakes = []engine.Take{{Limiter: ref, Key: key, N: n, Calendar: cal}, {Limiter: ref, Key: key, N: m, Calendar: other}}
		}
		out := make([]engine.Decision, len(takes))
		denied, now, err := q.l.takeAll(ctx, takes, out)
		if err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
		want := make([]engine.Decision, len(takes))
		wantDenied, _ := ref.TakeAllAt(now, refTakes, want)
		if denied != wantDenied {
			t.Fatalf("op %d: %+v denied %d, want %d", op, takes, denied, wantDenied)
		}
		for i := range out {
			if out[i] != want[i] {
				t.Fatalf("op %d: take %d of %+v = %+v, want %+v", op, i, takes, out[i], want[i])
			}
		}
	}
	if st := q.Stats(); st.Allowed == 0 || st.Denied == 0 {
		t.Errorf("stats %+v: the script should both allow and deny", st)
	}
}

// A rule's token bucket and quota on one key are one script, all or none:
// a denial by either leaves the other as it was.
func TestQuotaWithTokenBucketAllOrNone(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	bl, err := store.Bind(engine.Spec{ID: "tb", Name: "tb", Limit: 1e-4, Burst: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := bl.(*Limiter)
	q := bindQuota(t, store, "day", 3, engine.Calendar{Period: engine.Daily, Hour: farHour(time.UTC)})
	ctx := context.Background()
	both := func(key string) (int, []engine.Decision) {
		t.Helper()
		out := make([]engine.Decision, 2)
		k, err := b.TakeAll(ctx, []engine.Take{{Limiter: b, Key: key, N: 1}, {Limiter: q, Key: key, N: 1}}, out)
		if err != nil {
			t.Fatal(err)
		}
		return k, out
	}
	remaining := func(l engine.Limiter, key string) float64 {
		t.Helper()
		d, err := l.Take(ctx, key, 0)
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}
	scripts := b.Stats().Scripts
	for i := range 2 {
		if k, out := both("u"); k != -1 || !out[0].Allowed || !out[1].Allowed {
			t.Fatalf("take %d: denied %d, %+v", i, k, out)
		}
	}
	if got := b.Stats().Scripts - scripts; got != 2 {
		t.Errorf("two TakeAlls sent %d scripts, want 2: one round trip each", got)
	}
	// The bucket is empty: the quota keeps its 1 left.
	if k, out := both("u"); k != 0 || out[1].Allowed || out[1].Remaining != 1 {
		t.Errorf("an empty bucket: denied %d, %+v; want 0, the quota untouched", k, out)
	}
	if r := remaining(q, "u"); r != 1 {
		t.Errorf("quota after a denial by the bucket: %v left, want 1", r)
	}
	// A used-up quota: the bucket keeps its tokens.
	if d, err := q.Take(ctx, "v", 3); err != nil || !d.Allowed {
		t.Fatalf("Take(v, 3) = %+v, %v", d, err)
	}
	if k, out := both("v"); k != 1 || out[0].Allowed || out[1].RetryAfter <= 0 {
		t.Errorf("a used-up quota: denied %d, %+v; want 1 with a RetryAfter", k, out)
	}
	if r := remaining(b, "v"); r != 2 {
		t.Errorf("bucket after a denial by the quota: %v left, want 2", r)
	}
	// Keys in different slots go one script each; the quota's take is
	// given back when the bucket denies, and a period it began is gone.
	if _, err := b.Take(ctx, "empty", 2); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"u", "fresh"} {
		before := remaining(q, key)
		out := make([]engine.Decision, 2)
		k, err := q.TakeAll(ctx, []engine.Take{{Limiter: q, Key: key, N: 1}, {Limiter: b, Key: "empty", N: 1}}, out)
		if err != nil || k != 1 {
			t.Fatalf("%s: denied %d, %v; want 1", key, k, err)
		}
		if r := remaining(q, key); r != before {
			t.Errorf("%s: the quota has %v left after the give-back, want %v", key, r, before)
		}
	}
	if n := admin(t, srv.Addr(), "EXISTS", q.KeyFor("fresh")).(int64); n != 0 {
		t.Errorf("a period begun and given back left its key")
	}
}

// A take's own calendar decides where its period ends.
func TestQuotaPerTakeCalendar(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	own := engine.Calendar{Period: engine.Yearly}
	q := bindQuota(t, store, "y", 10, own)
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	cal := engine.Calendar{Period: engine.Daily, Hour: farHour(tokyo), Location: tokyo}
	ctx := context.Background()
	out := make([]engine.Decision, 1)
	if _, err := q.TakeAll(ctx, []engine.Take{{Limiter: q, Key: "k", N: 1, Calendar: &cal}}, out); err != nil {
		t.Fatal(err)
	}
	_, end := cal.Bounds(time.Now())
	if want := time.Until(end); out[0].ResetAfter > want+time.Minute || out[0].ResetAfter < want-time.Minute {
		t.Errorf("ResetAfter %v, want the take's calendar's %v", out[0].ResetAfter, want)
	}
	d, err := q.Take(ctx, "other", 1)
	_, yearEnd := own.Bounds(time.Now())
	if err != nil || d.ResetAfter < time.Until(yearEnd)-time.Minute {
		t.Errorf("own calendar: %+v, %v; want ResetAfter about %v", d, err, time.Until(yearEnd))
	}
}

// A period ends at the server's clock: a used-up key is denied until its
// end, with RetryAfter the time to it, its key expires there, and the next
// take begins the next period (ending at b2).
func TestQuotaRenewalAndExpiry(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	q := bindQuota(t, store, "r", 2, engine.Calendar{Period: engine.Daily})
	t0 := serverMillis(t, srv.Addr())
	b1, b2 := t0+1500, t0+86_400_000
	q.l.quota.BoundsFor = func(time.Time, engine.Calendar) (time.Time, time.Time) { return time.UnixMilli(b1), time.UnixMilli(b2) }
	ctx := context.Background()
	if d, err := q.Take(ctx, "k", 2); err != nil || !d.Allowed || d.ResetAfter > 1500*time.Millisecond {
		t.Fatalf("Take(k, 2) = %+v, %v; want allowed, reset within 1.5s", d, err)
	}
	d, err := q.Take(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 1500*time.Millisecond || d.Remaining != 0 {
		t.Fatalf("Take(k, 1) = %+v, %v; want denied until b1", d, err)
	}
	if ttl := admin(t, srv.Addr(), "PTTL", q.KeyFor("k")).(int64); ttl <= 0 || ttl > 1500 {
		t.Errorf("PTTL %d, want the time to the period's end", ttl)
	}
	for deadline := time.Now().Add(20 * time.Second); serverMillis(t, srv.Addr()) <= b1+5; {
		if time.Now().After(deadline) {
			t.Fatal("the server's clock did not pass b1")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := admin(t, srv.Addr(), "EXISTS", q.KeyFor("k")).(int64); n != 0 {
		t.Error("the key outlived its period")
	}
	d, err = q.Take(ctx, "k", 1)
	if err != nil || !d.Allowed || d.Remaining != 1 || d.ResetAfter < 23*time.Hour {
		t.Errorf("after the end: %+v, %v; want allowed in the period ending at b2", d, err)
	}
}

// A server clock past b2 fails a take that needs a new period, taking
// nothing and admitting nothing; a period in force still decides.
func TestQuotaClockAhead(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	q := bindQuota(t, store, "a", 5, engine.Calendar{Period: engine.Daily})
	t0 := serverMillis(t, srv.Addr())
	ahead := func(time.Time, engine.Calendar) (time.Time, time.Time) {
		return time.UnixMilli(t0 - 120_000), time.UnixMilli(t0 - 60_000)
	}
	q.l.quota.BoundsFor = ahead
	ctx := context.Background()
	d, err := q.Take(ctx, "k", 1)
	if !errors.Is(err, ErrClockAhead) || !errors.Is(err, engine.ErrUnavailable) || errors.Is(err, engine.ErrFallback) || d.Allowed {
		t.Fatalf("Take with the server a period ahead = %+v, %v; want denied, ErrClockAhead, ErrUnavailable", d, err)
	}
	if n := admin(t, srv.Addr(), "EXISTS", q.KeyFor("k")).(int64); n != 0 {
		t.Error("a failed take wrote its key")
	}
	q.l.quota.BoundsFor = func(time.Time, engine.Calendar) (time.Time, time.Time) {
		return time.UnixMilli(t0 + 3_600_000), time.UnixMilli(t0 + 7_200_000)
	}
	if d, err := q.Take(ctx, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("Take = %+v, %v", d, err)
	}
	q.l.quota.BoundsFor = ahead
	if d, err := q.Take(ctx, "k", 1); err != nil || !d.Allowed || d.Remaining != 3 {
		t.Errorf("a period in force, bounds behind: %+v, %v; want allowed, 3 left", d, err)
	}
	if st := q.Stats(); st.StoreErrors != 1 || st.FailedClosed != 1 {
		t.Errorf("stats %+v: want the failed take counted, answered closed", st)
	}
}

// Binds of a quota's ID share one Quota, retuned by SetQuota; a store with
// leases refuses quotas; a bad quota is an error naming the field.
func TestQuotaStoreBind(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	cal := engine.Calendar{Period: engine.Monthly, Day: 3}
	a := bindQuota(t, store, "m", 100, cal)
	b := bindQuota(t, store, "m", 50, engine.Calendar{Period: engine.Weekly})
	if a != b {
		t.Error("a changed quota of one ID got a limiter of its own")
	}
	if a.Burst() != 100 || a.Limit() != engine.Limit(100/(30*24*3600.0)) || a.Calendar() != cal {
		t.Errorf("Burst %v, Limit %v, Calendar %+v", a.Burst(), a.Limit(), a.Calendar())
	}
	ctx := context.Background()
	if _, err := a.Take(ctx, "k", 40); err != nil {
		t.Fatal(err)
	}
	if err := a.SetQuota(50, engine.Calendar{Period: engine.Weekly}); err != nil || a.Burst() != 50 {
		t.Fatalf("SetQuota: %v, Burst %v", err, a.Burst())
	}
	if d, _ := a.Take(ctx, "k", 0); d.Remaining != 10 {
		t.Errorf("after SetQuota(50): %v left, want 10: what was used stays", d.Remaining)
	}
	if err := a.SetQuota(0, engine.Calendar{Period: engine.Daily, Hour: 24}); err == nil ||
		!strings.Contains(err.Error(), "Quota") || !strings.Contains(err.Error(), "Hour") || a.Burst() != 50 {
		t.Errorf("bad SetQuota: %v, Burst %v", err, a.Burst())
	}
	tb, err := store.Bind(engine.Spec{ID: "m", Name: "m", Limit: a.Limit(), Burst: 50})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tb.(*Limiter); !ok {
		t.Errorf("a token bucket Spec bound a %T", tb)
	}
	leased := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1, Lease: &LeaseOptions{}})
	if _, err := leased.Bind(engine.QuotaSpec("m", "monthly", 100, cal)); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "lease") {
		t.Errorf("a quota on a store with leases: %v, want ErrInvalidConfig about leases", err)
	}
}

// While the store fails, a local quota with FallbackShare of the quota
// decides, together with the token buckets' fallback, all or none.
func TestQuotaStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1, BreakAfter: -1, FallbackShare: 0.4})
	q := bindQuota(t, store, "d", 5, engine.Calendar{Period: engine.Daily})
	bl, _ := store.Bind(engine.Spec{ID: "tb", Name: "tb", Limit: 1, Burst: 5})
	srv.Kill()
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		d, err := q.Take(ctx, "k", 1)
		if !errors.Is(err, engine.ErrFallback) || d.Allowed != want {
			t.Fatalf("take %d on a %s = %+v, %v; want allowed %v by the fallback (2 of 5)", i, "dead server", d, err, want)
		}
	}
	out := make([]engine.Decision, 2)
	k, err := q.TakeAll(ctx, []engine.Take{{Limiter: bl, Key: "k", N: 1}, {Limiter: q, Key: "k", N: 1}}, out)
	if !errors.Is(err, engine.ErrFallback) || k != 1 || out[0].Allowed || out[1].Allowed || out[1].RetryAfter <= 0 {
		t.Errorf("TakeAll with a used-up fallback quota = %d %+v, %v; want denied at 1 by the fallback", k, out, err)
	}
	if d, err := bl.Take(ctx, "k", 2); !errors.Is(err, engine.ErrFallback) || !d.Allowed {
		t.Errorf("the bucket's fallback after the denied TakeAll: %+v, %v; want its 2 tokens untouched", d, err)
	}
	if st := q.Stats(); st.Fallback != 4 || st.FailedClosed != 0 {
		t.Errorf("stats %+v: want 4 takes answered by the fallback", st)
	}
}
