package pgstore

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests' zones, whatever the machine has

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/lease"
	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// quotaStore is a Store on db that sweeps only when a test asks.
func quotaStore(t *testing.T, db *pgxpool.Pool, opts StoreOptions) *Store {
	t.Helper()
	opts.Prefix, opts.Timeout, opts.SweepEvery, opts.Heartbeat = uniquePrefix(), testTimeout, -1, -1
	s, err := NewStore(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

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

// dbMicros is the database's clock, in Unix microseconds.
func dbMicros(t *testing.T, db *pgxpool.Pool) int64 {
	t.Helper()
	var us int64
	if err := db.QueryRow(context.Background(), `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&us); err != nil {
		t.Fatal(err)
	}
	return us
}

// A script of takes, alone and in TakeAlls of one key and of two, at a
// clock that jumps across period ends and daylight-saving changes and
// steps back, with per-take calendars, costs that peek, fit, deny and can
// never pass, and quotas changed on the way, gets from the database
// exactly the Decisions an engine.Quota gives at the same times. The
// statements take the time from the test (at_us) and the instance's
// bounds follow it.
func TestQuotaEquivalence(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	ny, _ := time.LoadLocation("America/New_York")
	london, _ := time.LoadLocation("Europe/London")
	own := engine.Calendar{Period: engine.Daily, Hour: 2, Location: ny}
	q := bindQuota(t, store, "eq", 5, own)
	ref, err := engine.NewQuota(engine.QuotaConfig{Quota: 5, Calendar: own, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	// 2026-03-07 20:00 UTC: a day before New York's clocks spring forward.
	now := time.Date(2026, 3, 7, 20, 0, 0, 0, time.UTC)
	q.l.quota.Now = func() time.Time { return now }
	cals := []*engine.Calendar{nil,
		{Period: engine.Monthly, Day: 31, Hour: 9, Location: ny},
		{Period: engine.Weekly, Weekday: 7, Hour: 1, Location: london},
		{Period: engine.Daily, Hour: 2, Location: ny}}
	steps := []time.Duration{0, time.Second, 59 * time.Second, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour,
		31 * 24 * time.Hour, -time.Second, -time.Hour, -24 * time.Hour, 90 * time.Minute, -90 * time.Minute,
		13*time.Hour + 17*time.Second + 123456*time.Microsecond}
	costs := []float64{0, 0.001, 1, 1, 2.5, 5, 6, -1, math.NaN()}
	keys := []string{"a", "b", "c"}
	quotas := []struct {
		n   float64
		cal engine.Calendar
	}{{5, own}, {3, own}, {8, engine.Calendar{Period: engine.Weekly, Hour: 3}}}
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	for op := range 400 {
		now = now.Add(steps[rng.IntN(len(steps))])
		key := keys[rng.IntN(len(keys))]
		cal := cals[rng.IntN(len(cals))]
		n := costs[rng.IntN(len(costs))]
		var takes, refTakes []engine.Take
		switch k := rng.IntN(12); {
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
		default:
			m := costs[rng.IntN(len(costs))]
			other := key
			if k >= 9 {
				other = keys[rng.IntN(len(keys))]
			}
			takes = []engine.Take{{Limiter: q, Key: key, N: n, Calendar: cal}, {Limiter: q, Key: other, N: m, Calendar: cals[rng.IntN(len(cals))]}}
		}
		refTakes = append(refTakes, takes...)
		for i := range refTakes {
			refTakes[i].Limiter = ref
		}
		out := make([]engine.Decision, len(takes))
		at := now.UnixMicro()
		denied, _, err := q.l.takeAll(ctx, takes, out, &at)
		if err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
		want := make([]engine.Decision, len(takes))
		wantDenied, _ := ref.TakeAllAt(time.UnixMicro(at), refTakes, want)
		if denied != wantDenied {
			t.Fatalf("op %d at %v: %+v denied %d, want %d", op, now, takes, denied, wantDenied)
		}
		for i := range out {
			if out[i] != want[i] {
				t.Fatalf("op %d at %v: take %d of %+v = %+v, want %+v", op, now, i, takes, out[i], want[i])
			}
		}
	}
	if st := q.Stats(); st.Allowed == 0 || st.Denied == 0 {
		t.Errorf("stats %+v: the script should both allow and deny", st)
	}
}

// A rule's token bucket and quota are one statement, all or none: a
// denial by either leaves the other as it was.
func TestQuotaWithTokenBucketAllOrNone(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	bl, err := store.Bind(engine.Spec{ID: "tb", Name: "tb", Limit: frozen, Burst: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := bl.(*Limiter)
	q := bindQuota(t, store, "day", 3, engine.Calendar{Period: engine.Daily, Hour: (time.Now().UTC().Hour() + 12) % 24})
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
	calls := b.Stats().Calls
	for i := range 2 {
		if k, out := both("u"); k != -1 || !out[0].Allowed || !out[1].Allowed {
			t.Fatalf("take %d: denied %d, %+v", i, k, out)
		}
	}
	if got := b.Stats().Calls - calls; got != 2 {
		t.Errorf("two TakeAlls sent %d statements, want 2: one round trip each", got)
	}
	if k, out := both("u"); k != 0 || out[1].Allowed || out[1].Remaining != 1 {
		t.Errorf("an empty bucket: denied %d, %+v; want 0, the quota untouched", k, out)
	}
	if r := remaining(q, "u"); r != 1 {
		t.Errorf("quota after a denial by the bucket: %v left, want 1", r)
	}
	if d, err := q.Take(ctx, "v", 3); err != nil || !d.Allowed {
		t.Fatalf("Take(v, 3) = %+v, %v", d, err)
	}
	if k, out := both("v"); k != 1 || out[0].Allowed || out[1].RetryAfter <= 0 {
		t.Errorf("a used-up quota: denied %d, %+v; want 1 with a RetryAfter", k, out)
	}
	if r := remaining(b, "v"); r != 2 {
		t.Errorf("bucket after a denial by the quota: %v left, want 2", r)
	}
}

// A take's own calendar decides where its period ends.
func TestQuotaPerTakeCalendar(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	own := engine.Calendar{Period: engine.Yearly}
	q := bindQuota(t, store, "y", 10, own)
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	cal := engine.Calendar{Period: engine.Daily, Hour: (time.Now().In(tokyo).Hour() + 12) % 24, Location: tokyo}
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

// At the database's clock, a used-up key is denied until its period ends,
// with RetryAfter the time to the end; then the next take begins the
// period ending at b2, and Sweep removes the rows of periods that ended.
func TestQuotaRenewalAndSweep(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	q := bindQuota(t, store, "r", 2, engine.Calendar{Period: engine.Daily})
	t0 := dbMicros(t, db)
	b1, b2 := time.UnixMicro(t0+1_500_000), time.UnixMicro(t0+86_400_000_000)
	q.l.quota.BoundsFor = func(time.Time, engine.Calendar) (time.Time, time.Time) { return b1, b2 }
	ctx := context.Background()
	if d, err := q.Take(ctx, "k", 2); err != nil || !d.Allowed || d.ResetAfter > 1500*time.Millisecond {
		t.Fatalf("Take(k, 2) = %+v, %v; want allowed, reset within 1.5s", d, err)
	}
	if _, err := q.Take(ctx, "gone", 1); err != nil {
		t.Fatal(err)
	}
	d, err := q.Take(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 1500*time.Millisecond || d.Remaining != 0 {
		t.Fatalf("Take(k, 1) = %+v, %v; want denied until b1", d, err)
	}
	for deadline := time.Now().Add(20 * time.Second); dbMicros(t, db) <= b1.UnixMicro()+5000; {
		if time.Now().After(deadline) {
			t.Fatal("the database's clock did not pass b1")
		}
		time.Sleep(50 * time.Millisecond)
	}
	d, err = q.Take(ctx, "k", 1)
	if err != nil || !d.Allowed || d.Remaining != 1 || d.ResetAfter < 23*time.Hour {
		t.Errorf("after the end: %+v, %v; want allowed in the period ending at b2", d, err)
	}
	// Sweep's grace is the minute after an end: none of these rows yet.
	n, err := Sweep(ctx, db, SweepOptions{})
	if err != nil || n != 0 {
		t.Errorf("Sweep right after the end removed %d, %v; want none within its grace", n, err)
	}
	if _, err := db.Exec(ctx, `UPDATE faucet_buckets SET expires = expires - 120000000 WHERE key = $1`, []byte(q.KeyFor("gone"))); err != nil {
		t.Fatal(err)
	}
	var rows int
	n, err = Sweep(ctx, db, SweepOptions{})
	db.QueryRow(ctx, `SELECT count(*) FROM faucet_buckets WHERE key = $1`, []byte(q.KeyFor("gone"))).Scan(&rows)
	if err != nil || n != 1 || rows != 0 {
		t.Errorf("Sweep a minute after a period ended: removed %d (%v), %d rows left; want its row removed", n, err, rows)
	}
}

// A database clock past b2 fails a take that needs a new period, taking
// nothing and admitting nothing; a period in force still decides.
func TestQuotaClockAhead(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	q := bindQuota(t, store, "a", 5, engine.Calendar{Period: engine.Daily})
	t0 := dbMicros(t, db)
	ahead := func(time.Time, engine.Calendar) (time.Time, time.Time) {
		return time.UnixMicro(t0 - 120_000_000), time.UnixMicro(t0 - 60_000_000)
	}
	q.l.quota.BoundsFor = ahead
	ctx := context.Background()
	d, err := q.Take(ctx, "k", 1)
	if !errors.Is(err, ErrClockAhead) || !errors.Is(err, engine.ErrUnavailable) || errors.Is(err, engine.ErrFallback) || d.Allowed {
		t.Fatalf("Take with the database a period ahead = %+v, %v; want denied, ErrClockAhead, ErrUnavailable", d, err)
	}
	var rows int
	db.QueryRow(ctx, `SELECT count(*) FROM faucet_buckets WHERE key = $1 AND quanta > 0`, []byte(q.KeyFor("k"))).Scan(&rows)
	if rows != 0 {
		t.Error("a failed take wrote its row")
	}
	q.l.quota.BoundsFor = func(time.Time, engine.Calendar) (time.Time, time.Time) {
		return time.UnixMicro(t0 + 3_600_000_000), time.UnixMicro(t0 + 7_200_000_000)
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
// leases refuses quotas.
func TestQuotaStoreBind(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
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
	leased := quotaStore(t, db, StoreOptions{Lease: &lease.Options{}})
	if _, err := leased.Bind(engine.QuotaSpec("m", "monthly", 100, cal)); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "lease") {
		t.Errorf("a quota on a store with leases: %v, want ErrInvalidConfig about leases", err)
	}
}

// While the database fails, a local quota with FallbackShare of the quota
// decides, together with the token buckets' fallback, all or none.
func TestQuotaStoreDown(t *testing.T) {
	srv := pgtest.Start(t)
	db := poolOn(t, srv.DSN(), Schema{})
	store := quotaStore(t, db, StoreOptions{BreakAfter: -1, FallbackShare: 0.4})
	q := bindQuota(t, store, "d", 5, engine.Calendar{Period: engine.Daily})
	bl, _ := store.Bind(engine.Spec{ID: "tb", Name: "tb", Limit: 1, Burst: 5})
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A backend of the killed server may answer a last call or two
	// before it notices its postmaster is gone.
	for {
		if _, err := q.Take(ctx, "probe", 0); errors.Is(err, engine.ErrFallback) {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("the store still answers after the server was killed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, want := range []bool{true, true, false} {
		d, err := q.Take(ctx, "k", 1)
		if !errors.Is(err, engine.ErrFallback) || d.Allowed != want {
			t.Fatalf("take %d on a %s = %+v, %v; want allowed %v by the fallback (2 of 5)", i, "dead database", d, err, want)
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
	if st := q.Stats(); st.Fallback < 5 || st.FailedClosed != 0 {
		t.Errorf("stats %+v: want the probe and 4 takes answered by the fallback", st)
	}
}
