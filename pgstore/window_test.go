package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/lease"
	"github.com/faucetgo/faucet/pgstore/pgtest"
)

// bindWindow binds a window of n in any span of span, counted in slots
// parts, on store, as ID id.
func bindWindow(t *testing.T, store *Store, id string, n float64, span time.Duration, slots int) *Window {
	t.Helper()
	l, err := store.Bind(engine.WindowSpec(id, id, n, span, slots))
	if err != nil {
		t.Fatal(err)
	}
	w, ok := l.(*Window)
	if !ok {
		t.Fatalf("Bind of a window Spec returned a %T, want a *Window", l)
	}
	return w
}

// windowTakes runs takes at microsecond at through the store and refTakes
// through ref at the same time, and fails unless they decide alike.
func windowTakes(t *testing.T, w *Window, ref *engine.Window, at int64, takes []engine.Take, what string) []engine.Decision {
	t.Helper()
	refTakes := append([]engine.Take(nil), takes...)
	for i := range refTakes {
		if refTakes[i].Limiter == w {
			refTakes[i].Limiter = ref
		}
	}
	out := make([]engine.Decision, len(takes))
	denied, _, err := w.l.takeAll(context.Background(), takes, out, &at)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want := make([]engine.Decision, len(takes))
	wantDenied, _ := ref.TakeAllAt(time.UnixMicro(at), refTakes, want)
	if denied != wantDenied {
		t.Fatalf("%s at %v: %+v denied %d, want %d", what, time.UnixMicro(at), takes, denied, wantDenied)
	}
	for i := range out {
		if out[i] != want[i] {
			t.Fatalf("%s at %v: take %d of %+v = %+v, want %+v", what, time.UnixMicro(at), i, takes, out[i], want[i])
		}
	}
	return out
}

// A script of takes, alone and in TakeAlls of one key and of two, at a
// clock that moves within slots, across them and past whole windows, with
// costs that peek, fit, deny and can never pass, and limits changed on the
// way, gets from the database exactly the Decisions an engine.Window gives
// at the same times (at_us). Windows of 1 s in 4 slots, 2 s in 3 (a slot
// of 666,666,667 ns) and an hour in 16.
func TestWindowEquivalence(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	for _, tc := range []struct {
		span  time.Duration
		slots int
	}{{time.Second, 4}, {2 * time.Second, 3}, {time.Hour, 0}} {
		w := bindWindow(t, store, "eq"+tc.span.String(), 5, tc.span, tc.slots)
		ref, err := engine.NewWindow(engine.WindowConfig{Limit: 5, Window: tc.span, Slots: tc.slots, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		slot := tc.span / time.Duration(w.Slots())
		steps := []time.Duration{0, 0, time.Microsecond, slot / 3, slot, slot + 1, 2 * slot, tc.span, tc.span + slot, 3 * tc.span}
		costs := []float64{0, 0.001, 1, 1, 1, 2.5, 5, 6, -1, math.NaN()}
		keys := []string{"a", "b", "c"}
		rng := rand.New(rand.NewPCG(5, 6))
		at := time.Date(2026, 3, 7, 20, 0, 0, 0, time.UTC).UnixMicro() + 123_457
		for op := range 400 {
			at += steps[rng.IntN(len(steps))].Microseconds()
			key := keys[rng.IntN(len(keys))]
			n := costs[rng.IntN(len(costs))]
			var takes []engine.Take
			switch k := rng.IntN(12); {
			case k == 0:
				limit := []float64{5, 3, 8}[rng.IntN(3)]
				if err := w.SetLimitTokens(limit); err != nil {
					t.Fatal(err)
				}
				if err := ref.SetLimitTokens(limit); err != nil {
					t.Fatal(err)
				}
				continue
			case k < 7:
				takes = []engine.Take{{Limiter: w, Key: key, N: n}}
			default:
				other := key
				if k >= 9 {
					other = keys[rng.IntN(len(keys))]
				}
				takes = []engine.Take{{Limiter: w, Key: key, N: n}, {Limiter: w, Key: other, N: costs[rng.IntN(len(costs))]}}
			}
			windowTakes(t, w, ref, at, takes, fmt.Sprintf("%v op %d", tc.span, op))
		}
		if st := w.Stats(); st.Allowed == 0 || st.Denied == 0 {
			t.Errorf("stats %+v: the statements should both allow and deny", st)
		}
	}
}

// A clock that steps back counts a take in the key's newest slot, as in
// memory: the store and an engine.Window agree on every Decision, and the
// limit holds on the key's timeline.
func TestWindowClockStepsBack(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	w := bindWindow(t, store, "back", 5, time.Minute, 4)
	ref, err := engine.NewWindow(engine.WindowConfig{Limit: 5, Window: time.Minute, Slots: 4, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	t0 := time.Date(2026, 3, 7, 20, 0, 7, 0, time.UTC).UnixMicro()
	take := func(at int64, n float64) engine.Decision {
		return windowTakes(t, w, ref, at, []engine.Take{{Limiter: w, Key: "k", N: n}}, "back")[0]
	}
	take(t0, 2)
	if d := take(t0-40_000_000, 2); !d.Allowed || d.Remaining != 1 {
		t.Errorf("40 s back: %+v, want allowed in the newest slot, 1 left", d)
	}
	if d := take(t0-600_000_000, 2); d.Allowed || d.RetryAfter < 45*time.Second {
		t.Errorf("10 minutes back: %+v, want denied until the newest slot leaves, a minute after it", d)
	}
	// Slots of 15 s: t0's slot, 20:00:00 to 20:00:15, leaves the window
	// at 20:01:15.
	if d := take(t0+68_000_000-1, 2); d.Allowed {
		t.Errorf("a microsecond before the newest slot leaves: %+v, want denied", d)
	}
	if d := take(t0+68_000_000, 2); !d.Allowed || d.Remaining != 3 {
		t.Errorf("as the newest slot leaves: %+v, want allowed, 3 left", d)
	}
}

// A rule's token bucket, quota and window on one key are one statement,
// all or none: a denial by any leaves the others as they were.
func TestWindowWithTokenBucketAndQuotaAllOrNone(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	bl, err := store.Bind(engine.Spec{ID: "tb", Name: "tb", Limit: frozen, Burst: 3})
	if err != nil {
		t.Fatal(err)
	}
	b := bl.(*Limiter)
	q := bindQuota(t, store, "day", 4, engine.Calendar{Period: engine.Daily, Hour: (time.Now().UTC().Hour() + 12) % 24})
	w := bindWindow(t, store, "hour", 2, time.Hour, 0)
	ctx := context.Background()
	all := func(key string) (int, []engine.Decision) {
		t.Helper()
		out := make([]engine.Decision, 3)
		k, err := w.TakeAll(ctx, []engine.Take{{Limiter: b, Key: key, N: 1}, {Limiter: q, Key: key, N: 1}, {Limiter: w, Key: key, N: 1}}, out)
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
	calls := w.Stats().Calls
	for i := range 2 {
		if k, out := all("u"); k != -1 || !out[0].Allowed || !out[1].Allowed || !out[2].Allowed {
			t.Fatalf("take %d: denied %d, %+v", i, k, out)
		}
	}
	if got := w.Stats().Calls - calls; got != 2 {
		t.Errorf("two TakeAlls sent %d statements, want 2: one round trip each", got)
	}
	k, out := all("u")
	if k != 2 || out[2].Allowed || out[2].RetryAfter <= 0 || out[2].RetryAfter > time.Hour+time.Hour/16 || out[0].Remaining != 1 || out[1].Remaining != 2 {
		t.Errorf("a full window: denied %d, %+v; want 2, the others untouched", k, out)
	}
	if rb, rq := remaining(b, "u"), remaining(q, "u"); rb != 1 || rq != 2 {
		t.Errorf("after a denial by the window: bucket %v, quota %v left; want 1 and 2", rb, rq)
	}
	if _, err := b.Take(ctx, "v", 3); err != nil {
		t.Fatal(err)
	}
	if k, out := all("v"); k != 0 || out[2].Allowed || out[2].Remaining != 2 {
		t.Errorf("an empty bucket: denied %d, %+v; want 0, the window untouched", k, out)
	}
	if r := remaining(w, "v"); r != 2 {
		t.Errorf("window after a denial by the bucket: %v left, want 2", r)
	}
}

// A key's row expires when all its counts have left the window: at the
// end of its newest slot plus the window. Sweep removes it after its
// grace, and a take after that finds the whole limit.
func TestWindowExpiryAndSweep(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	w := bindWindow(t, store, "x", 2, time.Minute, 4)
	ctx := context.Background()
	at := time.Date(2026, 3, 7, 20, 0, 7, 0, time.UTC).UnixMicro()
	out := make([]engine.Decision, 1)
	if _, _, err := w.l.takeAll(ctx, []engine.Take{{Limiter: w, Key: "k", N: 2}}, out, &at); err != nil || !out[0].Allowed {
		t.Fatalf("Take(k, 2) = %+v, %v", out[0], err)
	}
	var expires, tick, quanta int64
	var counts []int64
	if err := db.QueryRow(ctx, `SELECT expires, tick, quanta, counts FROM faucet_buckets WHERE key = $1`, []byte(w.KeyFor("k"))).
		Scan(&expires, &tick, &quanta, &counts); err != nil {
		t.Fatal(err)
	}
	// Slots of 15 s: 20:00:07 is in the slot that ends at 20:00:15.
	end := time.Date(2026, 3, 7, 20, 1, 15, 0, time.UTC).UnixMicro()
	if expires != end || quanta != 2000 || len(counts) != 5 || counts[4] != 2000 || tick != end/15_000_000-5 {
		t.Errorf("row: expires %d, tick %d, quanta %d, counts %v; want expires %d, 2000 in the newest of 5 slots", expires, tick, quanta, counts, end)
	}
	if _, err := db.Exec(ctx, `UPDATE faucet_buckets SET expires = expires - 1e12::bigint WHERE key = $1`, []byte(w.KeyFor("k"))); err != nil {
		t.Fatal(err)
	}
	var rows int
	n, err := Sweep(ctx, db, SweepOptions{})
	db.QueryRow(ctx, `SELECT count(*) FROM faucet_buckets WHERE key = $1`, []byte(w.KeyFor("k"))).Scan(&rows)
	if err != nil || n < 1 || rows != 0 {
		t.Errorf("Sweep after the window: removed %d (%v), %d rows left; want the row removed", n, err, rows)
	}
	if _, _, err := w.l.takeAll(ctx, []engine.Take{{Limiter: w, Key: "k", N: 2}}, out, &at); err != nil || !out[0].Allowed {
		t.Errorf("after the sweep: %+v, %v; want a fresh key, the whole limit", out[0], err)
	}
}

// Binds of a window's ID with the same span and slots share one Window,
// retuned by SetLimitTokens; another span is apart, with rows of its own;
// a store with leases refuses windows.
func TestWindowStoreBind(t *testing.T) {
	db := newDB(t, Schema{})
	store := quotaStore(t, db, StoreOptions{})
	a := bindWindow(t, store, "m", 100, time.Minute, 0)
	b := bindWindow(t, store, "m", 50, time.Minute, 16)
	if a != b || a.Span() != time.Minute || a.Slots() != 16 || a.Limit() != engine.Limit(100/60.0) {
		t.Errorf("a changed limit of one ID: shared %v, Span %v, Slots %d, Limit %v", a == b, a.Span(), a.Slots(), a.Limit())
	}
	ctx := context.Background()
	if _, err := a.Take(ctx, "k", 40); err != nil {
		t.Fatal(err)
	}
	if err := a.SetLimitTokens(50); err != nil || a.Burst() != 50 {
		t.Fatalf("SetLimitTokens: %v, Burst %v", err, a.Burst())
	}
	if d, _ := a.Take(ctx, "k", 0); d.Remaining != 10 {
		t.Errorf("after SetLimitTokens(50): %v left, want 10: what was taken stays", d.Remaining)
	}
	if err := a.SetLimitTokens(0); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Limit") || a.Burst() != 50 {
		t.Errorf("bad SetLimitTokens: %v, Burst %v", err, a.Burst())
	}
	c := bindWindow(t, store, "m", 50, time.Hour, 16)
	if c == a || c.KeyFor("k") == a.KeyFor("k") {
		t.Error("a window of another span shares the first's limiter or rows")
	}
	leased := quotaStore(t, db, StoreOptions{Lease: &lease.Options{}})
	if _, err := leased.Bind(engine.WindowSpec("m", "hourly", 100, time.Hour, 0)); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "lease") {
		t.Errorf("a window on a store with leases: %v, want ErrInvalidConfig about leases", err)
	}
}

// While the database fails, a local window with FallbackShare of the
// limit decides, together with the token buckets' fallback, all or none.
func TestWindowStoreDown(t *testing.T) {
	srv := pgtest.Start(t)
	db := poolOn(t, srv.DSN(), Schema{})
	store := quotaStore(t, db, StoreOptions{BreakAfter: -1, FallbackShare: 0.4})
	w := bindWindow(t, store, "d", 5, time.Hour, 0)
	bl, _ := store.Bind(engine.Spec{ID: "tb", Name: "tb", Limit: 1, Burst: 5})
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A backend of the killed server may answer a last call or two
	// before it notices its postmaster is gone.
	for {
		if _, err := w.Take(ctx, "probe", 0); errors.Is(err, engine.ErrFallback) {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("the store still answers after the server was killed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, want := range []bool{true, true, false} {
		d, err := w.Take(ctx, "k", 1)
		if !errors.Is(err, engine.ErrFallback) || d.Allowed != want {
			t.Fatalf("take %d on a dead database = %+v, %v; want allowed %v by the fallback (2 of 5)", i, d, err, want)
		}
	}
	out := make([]engine.Decision, 2)
	k, err := w.TakeAll(ctx, []engine.Take{{Limiter: bl, Key: "k", N: 1}, {Limiter: w, Key: "k", N: 1}}, out)
	if !errors.Is(err, engine.ErrFallback) || k != 1 || out[0].Allowed || out[1].Allowed || out[1].RetryAfter <= 0 {
		t.Errorf("TakeAll with a full fallback window = %d %+v, %v; want denied at 1 by the fallback", k, out, err)
	}
	if d, err := bl.Take(ctx, "k", 2); !errors.Is(err, engine.ErrFallback) || !d.Allowed {
		t.Errorf("the bucket's fallback after the denied TakeAll: %+v, %v; want its 2 tokens untouched", d, err)
	}
	if st := w.Stats(); st.Fallback < 5 || st.FailedClosed != 0 {
		t.Errorf("stats %+v: want the probe and 4 takes answered by the fallback", st)
	}
}

// Two instances (stores on one table) taking one key's window at once
// admit exactly its limit between them: take_all locks the row.
func TestWindowConcurrentInstances(t *testing.T) {
	db := newDB(t, Schema{})
	prefix := uniquePrefix()
	instance := func() *Store {
		s, err := NewStore(db, StoreOptions{Prefix: prefix, Timeout: testTimeout, SweepEvery: -1, Heartbeat: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := instance(), instance()
	wa := bindWindow(t, a, "c", 20, time.Hour, 0)
	wb := bindWindow(t, b, "c", 20, time.Hour, 0)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		w := wa
		if g%2 == 1 {
			w = wb
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				d, err := w.Take(context.Background(), "k", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != 20 {
		t.Errorf("two instances admitted %d of 80, want the limit, 20", n)
	}
}
