package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/engine/limitertest"
)

// newMultiAt returns a MultiAt of new engines, one per config.
func newMultiAt(t testing.TB, cfgs ...engine.Config) (*engine.MultiAt, []*engine.Engine) {
	t.Helper()
	es := make([]*engine.Engine, len(cfgs))
	for i, c := range cfgs {
		es[i] = newEngine(t, c)
	}
	m, err := engine.AllEngines(es...)
	if err != nil {
		t.Fatalf("AllEngines: %v", err)
	}
	return m, es
}

// The composite admits exactly when every part's bucket, run on its own
// engine and given only the admitted takes, admits; its Decision is the
// parts' folded (smallest Remaining, longest waits); a denial leaves every
// part as it was; and no part ever admits what an exact bucket denies.
// Times never go back: a denied TakeAllAt gives its takes back at its own
// time, which moves a bucket's stamp (see TakeAllAt), so an earlier time
// afterwards would count as that one.
func TestMultiAgainstPartEngines(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	configs := [][]engine.Config{
		{{Limit: 10, Burst: 10}, {Limit: engine.Every(864 * time.Second), Burst: 100}},
		{{Limit: 2, Burst: 3}, {Limit: 0.5, Burst: 5}, {Limit: 7.3, Burst: 2.5}},
		{{Limit: 1000, Burst: 20}, {Limit: 1, Burst: 1e4}},
		{{Limit: 3, Burst: 4}},
	}
	for ci, cfgs := range configs {
		t.Run(fmt.Sprintf("config=%d", ci), func(t *testing.T) {
			m, parts := newMultiAt(t, cfgs...)
			shadows := make([]*engine.Engine, len(cfgs))
			models := make([]*model, len(cfgs))
			for j, c := range cfgs {
				shadows[j] = newEngine(t, c)
				models[j] = newModel(float64(c.Limit), c.Burst)
			}
			minBurst := m.Burst()
			out := make([]engine.Decision, len(parts))
			var ns int64
			admitted, denied := 0, 0
			for step := range 5000 {
				switch rng.IntN(4) {
				case 0: // same instant
				case 1:
					ns += rng.Int64N(int64(time.Millisecond))
				case 2:
					ns += rng.Int64N(int64(time.Second))
				default:
					ns += rng.Int64N(int64(2 * time.Minute))
				}
				now := t0.Add(time.Duration(ns))
				var n float64
				switch rng.IntN(5) {
				case 0:
					n = 0
				case 1:
					n = minBurst + float64(rng.IntN(3)) // above some burst
				case 2:
					n = float64(rng.IntN(1000)) / 997 // not multiples of 0.001
				default:
					n = float64(rng.IntN(int(minBurst*1000)+1)) / 1000
				}
				c := costOf(n)
				// What each part alone would do.
				want := true
				var wantRemaining, wantRetry, wantReset = 1e300, time.Duration(0), time.Duration(0)
				admits := make([]bool, len(parts))
				for j, s := range shadows {
					have := exactTokens(s.TokensAt(now, "k"))
					admits[j] = n <= cfgs[j].Burst && have.Cmp(c) >= 0
					want = want && admits[j]
					if !admits[j] {
						// A denial changes nothing: the shadow may decide it.
						d := s.AllowAt(now, "k", n)
						if d.Allowed {
							t.Fatalf("step %d: shadow %d allowed %v holding %v", step, j, n, ratF(have))
						}
						wantRetry = max(wantRetry, d.RetryAfter)
					}
				}
				k, err := m.TakePartsAt(now, "k", n, out)
				if err != nil {
					t.Fatal(err)
				}
				got := m.AllowAt(now, "k", 0) // a peek, folded
				if (k == -1) != want {
					t.Fatalf("step %d at %v: %v denied by part %d, want admitted=%v (parts alone: %v)", step, time.Duration(ns), n, k, want, admits)
				}
				if want {
					admitted++
					for j, s := range shadows {
						d := s.AllowAt(now, "k", n)
						if !d.Allowed || d != out[j] {
							t.Fatalf("step %d: part %d decided %+v, alone %+v", step, j, out[j], d)
						}
						if n > 0 {
							if models[j].at(ns).Cmp(c) < 0 {
								t.Fatalf("step %d: part %d admitted %v with exact tokens %v", step, j, n, ratF(models[j].at(ns)))
							}
							models[j].take(ns, c)
						}
						wantRemaining = min(wantRemaining, d.Remaining)
						wantReset = max(wantReset, d.ResetAfter)
					}
					if f := engine.Fold(out); f.Remaining != wantRemaining || f.ResetAfter != wantReset || f.RetryAfter != 0 {
						t.Fatalf("step %d: folded %+v, want Remaining %v ResetAfter %v", step, f, wantRemaining, wantReset)
					}
				} else {
					denied++
					if out[k].Allowed || out[k].RetryAfter <= 0 {
						t.Fatalf("step %d: denying part %d reported %+v", step, k, out[k])
					}
					if f := engine.Fold(out); f.Allowed || f.RetryAfter != wantRetry {
						t.Fatalf("step %d: folded denial %+v, want RetryAfter %v", step, f, wantRetry)
					}
				}
				// Every part holds what it holds alone: a denial took nothing.
				for j, p := range parts {
					if g, w := p.TokensAt(now, "k"), shadows[j].TokensAt(now, "k"); g != w {
						t.Fatalf("step %d: part %d holds %v, alone %v", step, j, g, w)
					}
					wantRemaining = min(wantRemaining, shadows[j].TokensAt(now, "k"))
				}
				if got.Remaining != wantRemaining {
					t.Fatalf("step %d: peek Remaining %v, want the smallest part's %v", step, got.Remaining, wantRemaining)
				}
			}
			if admitted < 100 || denied < 100 {
				t.Errorf("admitted %d, denied %d: the walk should exercise both", admitted, denied)
			}
		})
	}
}

// A TakeAll may name Multis and Engines together, through any of them: all
// are taken or none, the denied index is the take's, not the part's, and
// each out[i] is that take's parts folded.
func TestMultiTakeAllMixesMultisAndEngines(t *testing.T) {
	user, ue := newMultiAt(t, engine.Config{Limit: 1, Burst: 5}, engine.Config{Limit: 0.001, Burst: 8})
	tenant, te := newMultiAt(t, engine.Config{Limit: 1, Burst: 20}, engine.Config{Limit: 0.001, Burst: 3})
	global := newEngine(t, engine.Config{Limit: 1, Burst: 100})
	takes := []engine.Take{{Limiter: user, Key: "ann", N: 1}, {Limiter: global, Key: "", N: 1}, {Limiter: tenant, Key: "acme", N: 1}}
	out := make([]engine.Decision, len(takes))
	callers := []struct {
		name string
		at   engine.TakerAt
	}{{"MultiAt", user}, {"Engine", global}, {"other MultiAt", tenant}}
	for i := range 3 {
		c := callers[i]
		k, err := c.at.TakeAllAt(t0, takes, out)
		if err != nil || k != -1 {
			t.Fatalf("call %d through %s = %d, %v; want all taken", i, c.name, k, err)
		}
		// Folded: the tenant's Remaining is its tighter part's.
		if out[2].Remaining != float64(2-i) || out[0].Remaining != float64(4-i) || out[1].Remaining != float64(99-i) {
			t.Fatalf("call %d: out = %+v", i, out)
		}
	}
	// The tenant's day part is empty: denied at take 2, nothing taken.
	k, err := global.TakeAllAt(t0, takes, out)
	if err != nil || k != 2 {
		t.Fatalf("fourth call = %d, %v; want denied by take 2", k, err)
	}
	for i, d := range out {
		if d.Allowed {
			t.Errorf("out[%d] = %+v allowed in a denied call", i, d)
		}
	}
	if out[2].RetryAfter < 999*time.Second || out[0].RetryAfter != 0 {
		t.Errorf("denied call: out = %+v, want take 2 waiting for its day part, take 0 not waiting", out)
	}
	for _, c := range []struct {
		e    *engine.Engine
		key  string
		want float64
	}{{ue[0], "ann", 2}, {ue[1], "ann", 5}, {global, "", 97}, {te[0], "acme", 17}, {te[1], "acme", 0}} {
		if got := c.e.TokensAt(t0, c.key); got != c.want {
			t.Errorf("after the denial %q holds %v, want %v", c.key, got, c.want)
		}
	}
	// At the engines' own clocks, through a Multi from All, the same.
	slow := engine.Config{Limit: engine.Every(24 * time.Hour), Burst: 2}
	a, b := newEngine(t, slow), newEngine(t, engine.Config{Limit: engine.Every(24 * time.Hour), Burst: 1})
	plain, err := engine.All(a, b)
	if err != nil {
		t.Fatal(err)
	}
	clocked := []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: plain, Key: "j", N: 1}}
	for i, want := range []int{-1, 1} {
		if k, err := plain.TakeAll(context.Background(), clocked, out); err != nil || k != want {
			t.Errorf("TakeAll %d through a Multi = %d, %v; want %d", i, k, err, want)
		}
	}
	if got := a.TokensAt(time.Now(), "k"); got < 1 || got >= 1.01 {
		t.Errorf("a:k holds %v after one taken and one denied call, want 1", got)
	}
	// Misuse is reported with the index of the take.
	for _, tt := range []struct {
		takes []engine.Take
		want  error
		index string
	}{
		{[]engine.Take{{Limiter: user, Key: "a", N: 1}, {Limiter: (*engine.MultiAt)(nil), Key: "b", N: 1}}, engine.ErrNilLimiter, "takes[1]"},
		{[]engine.Take{{Limiter: user, Key: "a", N: 1}, {Limiter: fakeMulti(t), Key: "b", N: 1}}, engine.ErrForeignTake, "takes[1]"},
	} {
		_, err := user.TakeAllAt(t0, tt.takes, out)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.index) {
			t.Errorf("TakeAllAt(%v) = %v, want %v naming %s", tt.takes, err, tt.want, tt.index)
		}
	}
	if _, err := user.TakeAllAt(t0, takes, out[:2]); !errors.Is(err, engine.ErrShortOut) {
		t.Errorf("short out: %v, want ErrShortOut", err)
	}
}

// Each bad argument is an error naming it and the allowed range.
func TestAllRefusesBadParts(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
	f := newEngine(t, engine.Config{Limit: 1, Burst: 2})
	m, err := engine.All(e, f)
	if err != nil {
		t.Fatal(err)
	}
	nine := make([]engine.Limiter, 9)
	for i := range nine {
		nine[i] = newEngine(t, engine.Config{Limit: 1, Burst: 1})
	}
	five, _ := engine.All(nine[:5]...)
	four, _ := engine.All(nine[5:9]...)
	store := fakeMulti(t).Parts()[0]
	for _, tt := range []struct {
		name  string
		parts []engine.Limiter
		want  error
		says  []string
	}{
		{"none", nil, engine.ErrInvalidConfig, []string{"no parts", "1 to 8"}},
		{"nil", []engine.Limiter{e, nil}, engine.ErrNilLimiter, []string{"parts[1]"}},
		{"nil Engine", []engine.Limiter{(*engine.Engine)(nil)}, engine.ErrNilLimiter, []string{"parts[0]"}},
		{"nil Multi", []engine.Limiter{e, (*engine.Multi)(nil)}, engine.ErrNilLimiter, []string{"parts[1]"}},
		{"nine", nine, engine.ErrInvalidConfig, []string{"9 parts", "1 to 8"}},
		{"nine in Multis", []engine.Limiter{five, four}, engine.ErrInvalidConfig, []string{"9 parts", "1 to 8"}},
		{"two stores", []engine.Limiter{e, store}, engine.ErrForeignTake, []string{"parts[1]", "parts[0]", "one store"}},
		{"twice", []engine.Limiter{e, f, e}, engine.ErrInvalidConfig, []string{"parts[2] is parts[0]"}},
		{"twice through a Multi", []engine.Limiter{f, m}, engine.ErrInvalidConfig, []string{"parts[1] is parts[0]"}},
	} {
		got, err := engine.All(tt.parts...)
		if got != nil || !errors.Is(err, tt.want) {
			t.Errorf("%s: All = %v, %v; want an error wrapping %v", tt.name, got, err, tt.want)
			continue
		}
		for _, s := range tt.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tt.name, err, s)
			}
		}
	}
	if _, err := engine.AllEngines(e, nil); !errors.Is(err, engine.ErrNilLimiter) || !strings.Contains(err.Error(), "AllEngines: parts[1]") {
		t.Errorf("AllEngines(e, nil) = %v, want ErrNilLimiter naming parts[1]", err)
	}
	if _, err := engine.AllEngines(); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "AllEngines") {
		t.Errorf("AllEngines() = %v, want ErrInvalidConfig naming AllEngines", err)
	}
}

// A Multi given to All counts as its parts; Parts is a copy; Limit and
// Burst are the lowest parts', live; Close closes every part; a Multi of
// Engines from All is not a TakerAt, one from AllEngines is.
func TestMultiParts(t *testing.T) {
	a := newEngine(t, engine.Config{Limit: 10, Burst: 10})
	b := newEngine(t, engine.Config{Limit: 0.5, Burst: 50})
	c := newEngine(t, engine.Config{Limit: 3, Burst: 5})
	ab, _ := engine.AllEngines(a, b)
	m, err := engine.All(ab, c)
	if err != nil {
		t.Fatal(err)
	}
	ps := m.Parts()
	if len(ps) != 3 || ps[0] != a || ps[1] != b || ps[2] != c {
		t.Fatalf("Parts = %v, want a, b, c", ps)
	}
	ps[0] = c
	if m.Parts()[0] != a {
		t.Error("Parts shares its slice with the Multi")
	}
	if m.Limit() != 0.5 || m.Burst() != 5 {
		t.Errorf("Limit, Burst = %v, %v; want 0.5, 5", m.Limit(), m.Burst())
	}
	if err := c.SetAt(t0, 0.1, 4); err != nil {
		t.Fatal(err)
	}
	if m.Limit() != 0.1 || m.Burst() != 4 {
		t.Errorf("after a part's SetAt Limit, Burst = %v, %v; want 0.1, 4", m.Limit(), m.Burst())
	}
	var l engine.Limiter = m
	if _, ok := l.(engine.TakerAt); ok {
		t.Error("a Multi from All is a TakerAt")
	}
	if _, ok := l.(engine.Retuner); ok {
		t.Error("a Multi is a Retuner")
	}
	l = ab
	if _, ok := l.(engine.TakerAt); !ok {
		t.Error("a MultiAt is not a TakerAt")
	}

	s := &fakeStore{}
	x, y := s.open(t, 1, 1), s.open(t, 1, 1)
	x.closeErr = errors.New("x failed")
	y.closeErr = errors.New("y failed")
	fm, err := engine.All(x, y)
	if err != nil {
		t.Fatal(err)
	}
	if err := fm.Close(); err == nil || !strings.Contains(err.Error(), "x failed") || !strings.Contains(err.Error(), "y failed") || x.closed != 1 || y.closed != 1 {
		t.Errorf("Close = %v, closed %d and %d; want both closed and both errors", err, x.closed, y.closed)
	}
	ctx := context.Background()
	for _, l := range []interface {
		engine.Limiter
		TakeParts(context.Context, string, float64, []engine.Decision) (int, error)
	}{(*engine.Multi)(nil), (*engine.MultiAt)(nil)} {
		_, err1 := l.Take(ctx, "k", 1)
		_, err2 := l.TakeAll(ctx, nil, nil)
		_, err3 := l.TakeParts(ctx, "k", 1, nil)
		for i, err := range []error{err1, err2, err3, l.Close()} {
			if !errors.Is(err, engine.ErrNilLimiter) {
				t.Errorf("method %d on a nil %T: %v, want ErrNilLimiter", i, l, err)
			}
		}
	}
	if _, err := (*engine.MultiAt)(nil).TakeAllAt(t0, nil, nil); !errors.Is(err, engine.ErrNilLimiter) {
		t.Errorf("TakeAllAt on a nil MultiAt: %v", err)
	}
}

// A Multi of another store decides through that store's TakeAll, all parts
// together, and folds what it answers, failures included.
func TestMultiOfAStore(t *testing.T) {
	s := &fakeStore{}
	sec, day, other := s.open(t, 10, 10), s.open(t, 0.001, 12), s.open(t, 1, 100)
	m, err := engine.All(sec, day)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 10 {
		if d, err := m.Take(ctx, "k", 1); err != nil || !d.Allowed || d.Remaining != float64(9-i) {
			t.Fatalf("take %d = %+v, %v", i, d, err)
		}
	}
	out := make([]engine.Decision, 2)
	k, err := m.TakeParts(ctx, "k", 1, out)
	if err != nil || k != 0 || out[0].RetryAfter != 100*time.Millisecond || out[1].Remaining != 2 {
		t.Fatalf("11th take = %d, %+v, %v; want denied by part 0 for 100ms", k, out, err)
	}
	// A Multi and a plain limiter of the store in one TakeAll.
	takes := []engine.Take{{Limiter: other, Key: "g", N: 5}, {Limiter: m, Key: "j", N: 11}}
	out = make([]engine.Decision, 2)
	if k, err := m.TakeAll(ctx, takes, out); err != nil || k != 1 || out[1].RetryAfter != engine.InfDuration || out[0].Allowed {
		t.Fatalf("TakeAll with a cost above the second's burst = %d, %+v, %v; want 1, never", k, out, err)
	}
	if got := other.e.TokensAt(s.now, "g"); got != 100 {
		t.Errorf("the plain take was kept: g holds %v", got)
	}
	takes[1].N = 2
	if k, err := m.TakeAll(ctx, takes, out); err != nil || k != -1 || out[1].Remaining != 8 || out[0].Remaining != 95 {
		t.Fatalf("TakeAll = %d, %+v, %v; want both taken", k, out, err)
	}
	// The store refuses a limiter of another store: the error counts part
	// by part.
	stranger := (&fakeStore{}).open(t, 1, 1)
	_, err = m.TakeAll(ctx, []engine.Take{{Limiter: m, Key: "k", N: 1}, {Limiter: stranger, Key: "k", N: 1}}, out)
	if !errors.Is(err, engine.ErrForeignTake) || !strings.Contains(err.Error(), "part by part") {
		t.Errorf("a take of another store: %v, want ErrForeignTake counting part by part", err)
	}
	// Engines are refused before the store is asked.
	e := newEngine(t, engine.Config{Limit: 1, Burst: 1})
	if _, err := m.TakeAll(ctx, []engine.Take{{Limiter: e, Key: "k", N: 1}}, out); !errors.Is(err, engine.ErrForeignTake) || s.calls.Load() == 0 {
		t.Errorf("an Engine in a store's TakeAll: %v, want ErrForeignTake", err)
	}
	// A failure: the store's answer is folded and its error returned.
	s.fail = true
	d, err := m.Take(ctx, "k", 1)
	if !errors.Is(err, engine.ErrUnavailable) || d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("Take on a failing store = %+v, %v; want its denial and ErrUnavailable", d, err)
	}
}

// Allocation-free on live keys, for Engines: Take, TakeParts, AllowAt and
// TakeAllAt naming Multis, through any receiver.
func TestMultiAllocatesNothing(t *testing.T) {
	m, es := newMultiAt(t, engine.Config{Limit: 1e6, Burst: 1e6}, engine.Config{Limit: 1e6, Burst: 1e6}, engine.Config{Limit: 1e6, Burst: 1e6})
	g := newEngine(t, engine.Config{Limit: 1e6, Burst: 1e6})
	drained, _ := newMultiAt(t, engine.Config{Limit: 1e6, Burst: 1e6}, engine.Config{Limit: 1, Burst: 1})
	drained.AllowAt(t0, "hot", 1)
	m.AllowAt(t0, "hot", 1)
	g.AllowAt(t0, "", 1)
	ctx := context.Background()
	var l engine.Limiter = m
	out := make([]engine.Decision, 8)
	takes := []engine.Take{{Limiter: m, Key: "hot", N: 1}, {Limiter: g, Key: "", N: 1}, {Limiter: drained, Key: "hot", N: 0}}
	denied := []engine.Take{{Limiter: m, Key: "hot", N: 1}, {Limiter: drained, Key: "hot", N: 1}}
	for _, tt := range []struct {
		name string
		fn   func()
	}{
		{"Take", func() { sink, _ = l.Take(ctx, "hot", 1) }},
		{"TakeParts", func() { m.TakeParts(ctx, "hot", 1, out) }},
		{"TakePartsAt", func() { m.TakePartsAt(t0, "hot", 1, out) }},
		{"AllowAt", func() { sink = m.AllowAt(t0, "hot", 1) }},
		{"AllowAt/denied", func() { sink = drained.AllowAt(t0, "hot", 1) }},
		{"TakeAllAt", func() { m.TakeAllAt(t0, takes, out) }},
		{"TakeAllAt/denied", func() { m.TakeAllAt(t0, denied, out) }},
		{"Engine.TakeAllAt", func() { es[0].TakeAllAt(t0, takes, out) }},
		{"TakeAll", func() { l.TakeAll(ctx, takes, out) }},
	} {
		if n := testing.AllocsPerRun(500, tt.fn); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", tt.name, n)
		}
	}
}

// Many goroutines on one key at one instant: the composite never admits
// more than its smallest burst, every part holds exactly its burst less
// what was admitted (give-backs at the take's instant are exact), and the
// rest of the smallest burst is then admitted, no more.
func TestMultiConcurrentTakes(t *testing.T) {
	const tight = 20
	m, es := newMultiAt(t, engine.Config{Limit: 1e-4, Burst: 30}, engine.Config{Limit: 1e-4, Burst: tight}, engine.Config{Limit: 1e-4, Burst: 25})
	g := newEngine(t, engine.Config{Limit: 1e-4, Burst: 1000})
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			out := make([]engine.Decision, 2)
			for i := range 10 {
				var allowed bool
				if (w+i)%2 == 0 {
					k, err := m.TakeAllAt(t0, []engine.Take{{Limiter: g, Key: "", N: 1}, {Limiter: m, Key: "hot", N: 1}}, out)
					if err != nil {
						t.Error(err)
						return
					}
					allowed = k == -1
				} else {
					allowed = m.AllowAt(t0, "hot", 1).Allowed
				}
				if allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	got := admitted.Load()
	if got > tight || got == 0 {
		t.Fatalf("admitted %d, want 1 to %d", got, tight)
	}
	for i, e := range es {
		if have, want := e.TokensAt(t0, "hot"), e.Burst()-float64(got); have != want {
			t.Errorf("part %d holds %v after %d admitted, want %v", i, have, got, want)
		}
	}
	rest := 0
	for m.AllowAt(t0, "hot", 1).Allowed {
		rest++
	}
	if int(got)+rest != tight {
		t.Errorf("admitted %d concurrently and %d after, want %d in all", got, rest, tight)
	}
}

// The conformance suite, on a Multi of one Engine and on one whose second
// part never binds before the first.
func TestMultiConformance(t *testing.T) {
	t.Run("parts=1", func(t *testing.T) {
		limitertest.Run(t, limitertest.Harness{
			Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
				m, _ := newMultiAt(t, engine.Config{Limit: limit, Burst: burst})
				return m
			},
		})
	})
	t.Run("parts=2", func(t *testing.T) {
		limitertest.Run(t, limitertest.Harness{
			Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
				m, _ := newMultiAt(t, engine.Config{Limit: 2 * limit, Burst: 2 * burst}, engine.Config{Limit: limit, Burst: burst})
				return m
			},
		})
	})
}

// fakeStore is a store other than the Engine, for Multis that decide
// through a dynamic TakeAll: its limiters accept only each other, and
// decide on engines at the store's clock.
type fakeStore struct {
	now   time.Time
	fail  bool
	calls atomic.Int64
}

type fakeLimiter struct {
	s        *fakeStore
	e        *engine.Engine
	closeErr error
	closed   int
}

func (s *fakeStore) open(t *testing.T, limit engine.Limit, burst float64) *fakeLimiter {
	return &fakeLimiter{s: s, e: newEngine(t, engine.Config{Limit: limit, Burst: burst})}
}

// fakeMulti is a Multi of a fakeStore.
func fakeMulti(t *testing.T) *engine.Multi {
	s := &fakeStore{}
	m, err := engine.All(s.open(t, 1, 1), s.open(t, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (l *fakeLimiter) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	out := make([]engine.Decision, 1)
	_, err := l.TakeAll(ctx, []engine.Take{{Limiter: l, Key: key, N: n}}, out)
	return out[0], err
}

func (l *fakeLimiter) TakeAll(_ context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	l.s.calls.Add(1)
	et := make([]engine.Take, len(takes))
	for i, tk := range takes {
		fl, ok := tk.Limiter.(*fakeLimiter)
		if !ok || fl.s != l.s {
			return -1, fmt.Errorf("fake: %w: takes[%d]", engine.ErrForeignTake, i)
		}
		et[i] = engine.Take{Limiter: fl.e, Key: tk.Key, N: tk.N}
	}
	if l.s.fail {
		for i := range takes {
			out[i] = engine.Decision{RetryAfter: time.Second}
		}
		return 0, fmt.Errorf("fake: %w", engine.ErrUnavailable)
	}
	return l.e.TakeAllAt(l.s.now, et, out)
}

func (l *fakeLimiter) Limit() engine.Limit { return l.e.Limit() }
func (l *fakeLimiter) Burst() float64      { return l.e.Burst() }
func (l *fakeLimiter) Close() error        { l.closed++; return l.closeErr }
