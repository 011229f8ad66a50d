package redisstore

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// The tests of strict windows run takes at the server's time, which
// decides the slot; an engine.Window replays them at the times the
// scripts report (Limiter.takeAll).

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

// A script of takes, alone and in TakeAlls, with costs that peek, fit,
// deny and can never pass, and limits changed on the way, gets from the
// store exactly the Decisions an engine.Window gives at the server's
// times. The takes run over a few seconds, across many slots of a 1 s
// window of 4 slots and a 2 s window of 3 (a slot of 666,666,667 ns, not
// a whole microsecond).
func TestWindowEquivalence(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	for _, tc := range []struct {
		span  time.Duration
		slots int
	}{{time.Second, 4}, {2 * time.Second, 3}} {
		w := bindWindow(t, store, "eq"+tc.span.String(), 5, tc.span, tc.slots)
		ref, err := engine.NewWindow(engine.WindowConfig{Limit: 5, Window: tc.span, Slots: tc.slots, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		costs := []float64{0, 0.001, 1, 1, 1, 2.5, 5, 6, -1, math.NaN()}
		keys := []string{"a", "b", "c"}
		rng := rand.New(rand.NewPCG(1, 2))
		ctx := context.Background()
		for op := range 400 {
			key := keys[rng.IntN(len(keys))]
			n := costs[rng.IntN(len(costs))]
			var takes, refTakes []engine.Take
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
			case k == 1:
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
				continue
			case k < 8:
				takes = []engine.Take{{Limiter: w, Key: key, N: n}}
				refTakes = []engine.Take{{Limiter: ref, Key: key, N: n}}
			default:
				// One key twice: one slot, one script.
				m := costs[rng.IntN(len(costs))]
				takes = []engine.Take{{Limiter: w, Key: key, N: n}, {Limiter: w, Key: key, N: m}}
				refTakes = []engine.Take{{Limiter: ref, Key: key, N: n}, {Limiter: ref, Key: key, N: m}}
			}
			out := make([]engine.Decision, len(takes))
			denied, now, err := w.l.takeAll(ctx, unwrapShapes(takes), out)
			if err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
			want := make([]engine.Decision, len(takes))
			wantDenied, _ := ref.TakeAllAt(now, refTakes, want)
			if denied != wantDenied {
				t.Fatalf("%v op %d: %+v denied %d, want %d", tc.span, op, takes, denied, wantDenied)
			}
			for i := range out {
				if out[i] != want[i] {
					t.Fatalf("%v op %d: take %d of %+v = %+v, want %+v", tc.span, op, i, takes, out[i], want[i])
				}
			}
		}
		if st := w.Stats(); st.Allowed == 0 || st.Denied == 0 {
			t.Errorf("stats %+v: the script should both allow and deny", st)
		}
	}
}

// A rule's token bucket, quota and window on one key are one script, all
// or none: a denial by any leaves the others as they were; over several
// hash slots, the window's take is given back to its slot.
func TestWindowWithTokenBucketAndQuotaAllOrNone(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	bl, err := store.Bind(engine.Spec{ID: "tb", Name: "tb", Limit: 1e-4, Burst: 3})
	if err != nil {
		t.Fatal(err)
	}
	b := bl.(*Limiter)
	q := bindQuota(t, store, "day", 4, engine.Calendar{Period: engine.Daily, Hour: farHour(time.UTC)})
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
	scripts := w.Stats().Scripts
	for i := range 2 {
		if k, out := all("u"); k != -1 || !out[0].Allowed || !out[1].Allowed || !out[2].Allowed {
			t.Fatalf("take %d: denied %d, %+v", i, k, out)
		}
	}
	if got := w.Stats().Scripts - scripts; got != 2 {
		t.Errorf("two TakeAlls sent %d scripts, want 2: one round trip each", got)
	}
	// The window is full: the bucket and the quota keep what they had.
	k, out := all("u")
	if k != 2 || out[2].Allowed || out[2].RetryAfter <= 0 || out[2].RetryAfter > time.Hour+time.Hour/16 || out[0].Remaining != 1 || out[1].Remaining != 2 {
		t.Errorf("a full window: denied %d, %+v; want 2, the others untouched", k, out)
	}
	if rb, rq := remaining(b, "u"), remaining(q, "u"); rb != 1 || rq != 2 {
		t.Errorf("after a denial by the window: bucket %v, quota %v left; want 1 and 2", rb, rq)
	}
	// An empty bucket: the window keeps its room.
	if _, err := b.Take(ctx, "v", 3); err != nil {
		t.Fatal(err)
	}
	if k, out := all("v"); k != 0 || out[2].Allowed || out[2].Remaining != 2 {
		t.Errorf("an empty bucket: denied %d, %+v; want 0, the window untouched", k, out)
	}
	if r := remaining(w, "v"); r != 2 {
		t.Errorf("window after a denial by the bucket: %v left, want 2", r)
	}
	// Keys in different slots go one script each; the window's take is
	// given back when the bucket denies, and a key it began is gone.
	for _, key := range []string{"x", "fresh"} {
		if key == "x" {
			if _, err := w.Take(ctx, key, 1); err != nil {
				t.Fatal(err)
			}
		}
		before := remaining(w, key)
		out := make([]engine.Decision, 2)
		k, err := w.TakeAll(ctx, []engine.Take{{Limiter: w, Key: key, N: 1}, {Limiter: b, Key: "v", N: 1}}, out)
		if err != nil || k != 1 {
			t.Fatalf("%s: denied %d, %v; want 1", key, k, err)
		}
		if r := remaining(w, key); r != before {
			t.Errorf("%s: the window has %v left after the give-back, want %v", key, r, before)
		}
	}
	if n := admin(t, srv.Addr(), "EXISTS", w.KeyFor("fresh")).(int64); n != 0 {
		t.Errorf("a key begun and given back was left")
	}
}

// A key expires when all its counts have left the window: at the end of
// its newest slot plus the window, and a take after it finds the whole
// limit.
func TestWindowExpiry(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	w := bindWindow(t, store, "x", 2, time.Second, 2)
	ctx := context.Background()
	t0 := serverMillis(t, srv.Addr())
	if d, err := w.Take(ctx, "k", 2); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Take(k, 2) = %+v, %v", d, err)
	}
	d, err := w.Take(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 1500*time.Millisecond {
		t.Fatalf("Take(k, 1) = %+v, %v; want denied for at most the window and a slot", d, err)
	}
	// Slots of 500 ms: the key took in the slot of t0, which leaves the
	// window when the slot two after it begins.
	end := (t0/500 + 3) * 500
	pexp := admin(t, srv.Addr(), "PEXPIRETIME", w.KeyFor("k")).(int64)
	if pexp < end-500 || pexp > end+1 {
		t.Errorf("PEXPIRETIME %d, want %d: the end of the key's slot plus the window", pexp, end)
	}
	for deadline := time.Now().Add(20 * time.Second); admin(t, srv.Addr(), "EXISTS", w.KeyFor("k")).(int64) != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the key outlived its window")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d, err := w.Take(ctx, "k", 2); err != nil || !d.Allowed {
		t.Errorf("after expiry: %+v, %v; want the whole limit", d, err)
	}
}

// Binds of a window's ID with the same span and slots share one Window,
// retuned by SetLimitTokens; another span is apart, with keys of its own;
// a store with leases refuses windows; a bad window names the field.
func TestWindowStoreBind(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	a := bindWindow(t, store, "m", 100, time.Minute, 0)
	b := bindWindow(t, store, "m", 50, time.Minute, 16)
	if a != b {
		t.Error("a changed limit of one ID got a limiter of its own")
	}
	if a.Burst() != 100 || a.Limit() != engine.Limit(100/60.0) || a.Span() != time.Minute || a.Slots() != 16 {
		t.Errorf("Burst %v, Limit %v, Span %v, Slots %d", a.Burst(), a.Limit(), a.Span(), a.Slots())
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
		t.Error("a window of another span shares the first's limiter or keys")
	}
	if d, _ := c.Take(ctx, "k", 0); d.Remaining != 50 {
		t.Errorf("another span read the first's counts: %v left", d.Remaining)
	}
	if _, err := store.Bind(engine.WindowSpec("bad", "bad", 1, time.Millisecond, 65)); !errors.Is(err, ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "Window") || !strings.Contains(err.Error(), "Slots") {
		t.Errorf("a bad window: %v, want ErrInvalidConfig naming Window and Slots", err)
	}
	leased := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1, Lease: &LeaseOptions{}})
	if _, err := leased.Bind(engine.WindowSpec("m", "hourly", 100, time.Hour, 0)); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "lease") {
		t.Errorf("a window on a store with leases: %v, want ErrInvalidConfig about leases", err)
	}
}

// While the store fails, a local window with FallbackShare of the limit
// decides, together with the token buckets' fallback, all or none.
func TestWindowStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1, BreakAfter: -1, FallbackShare: 0.4})
	w := bindWindow(t, store, "d", 5, time.Hour, 0)
	bl, _ := store.Bind(engine.Spec{ID: "tb", Name: "tb", Limit: 1, Burst: 5})
	srv.Kill()
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		d, err := w.Take(ctx, "k", 1)
		if !errors.Is(err, engine.ErrFallback) || d.Allowed != want {
			t.Fatalf("take %d on a dead server = %+v, %v; want allowed %v by the fallback (2 of 5)", i, d, err, want)
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
	if st := w.Stats(); st.Fallback != 4 || st.FailedClosed != 0 {
		t.Errorf("stats %+v: want 4 takes answered by the fallback", st)
	}
}

// A key whose newest slot is after the server's clock (a clock that
// stepped back) takes in that newest slot, as in memory: the script keeps
// the slot, and the denial that follows waits for it to leave.
func TestWindowClockStepsBack(t *testing.T) {
	srv := redistest.Start(t)
	store := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1})
	w := bindWindow(t, store, "back", 5, 4*time.Second, 4)
	ctx := context.Background()
	// Slots of a second: the key's newest is ten seconds ahead.
	ahead := serverMillis(t, srv.Addr())/1000 + 10
	key := w.KeyFor("k")
	admin(t, srv.Addr(), "SET", key, strconv.FormatInt(ahead, 10)+" 0 1000 0 0 3000", "EX", "60")
	d, err := w.Take(ctx, "k", 1)
	if err != nil || !d.Allowed || d.Remaining != 0 || d.ResetAfter < 14*time.Second || d.ResetAfter > 15*time.Second {
		t.Fatalf("Take(k, 1) = %+v, %v; want allowed in the newest slot, reset after it leaves, 14-15 s on", d, err)
	}
	if got := admin(t, srv.Addr(), "GET", key).(string); got != strconv.FormatInt(ahead, 10)+" 0 1000 0 0 4000" {
		t.Errorf("key %q, want the take in the newest slot", got)
	}
	// Slot ahead-3 leaves when ahead+2 begins: 11 to 12 s from now.
	d, err = w.Take(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter < 11*time.Second || d.RetryAfter > 12*time.Second {
		t.Errorf("Take(k, 1) = %+v, %v; want denied until the slot of 1000 leaves, 11-12 s on", d, err)
	}
}

// Two instances (stores on one server and Prefix) taking one key's window
// at once admit exactly its limit between them.
func TestWindowConcurrentInstances(t *testing.T) {
	srv := redistest.Start(t)
	wa := bindWindow(t, hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1}), "c", 20, time.Hour, 0)
	wb := bindWindow(t, hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1}), "c", 20, time.Hour, 0)
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
