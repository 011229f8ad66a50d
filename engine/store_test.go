package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// A Pool shares one Limiter per ID among its Binds and closes it after the
// last Release.
func TestPoolSharesAndReleases(t *testing.T) {
	p := engine.NewEnginePool(engine.Config{SweepInterval: -1})
	defer p.Close()
	spec := engine.Spec{ID: "api#1", Name: "api", Limit: 1, Burst: 5}
	a, err := p.Bind(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Bind(spec)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || p.Len() != 1 {
		t.Fatalf("two Binds of one ID: %p and %p, %d bound; want one shared Limiter", a, b, p.Len())
	}
	other, err := p.Bind(engine.Spec{ID: "api#2", Name: "api", Limit: 1, Burst: 5})
	if err != nil || other == a {
		t.Fatalf("Bind of another ID = %p, %v; want a Limiter of its own", other, err)
	}
	p.Release(a)
	if p.Len() != 2 {
		t.Errorf("after one of two Releases: %d bound, want 2", p.Len())
	}
	p.Release(b)
	p.Release(b) // one too many: ignored
	if p.Len() != 1 {
		t.Errorf("after the last Release of api#1: %d bound, want 1", p.Len())
	}
	c, _ := p.Bind(spec)
	if c == a {
		t.Errorf("a Bind after the last Release returned the closed Limiter")
	}
	if d, _ := c.Take(context.Background(), "k", 0); d.Remaining != 5 {
		t.Errorf("a rebound ID's bucket holds %v, want a full 5", d.Remaining)
	}
}

// A Retuner bound again with another limit is shared; the caller retunes it.
// A limit it cannot take fails the Bind and changes nothing.
func TestPoolRetunerKeepsItsBuckets(t *testing.T) {
	p := engine.NewEnginePool(engine.Config{SweepInterval: -1})
	defer p.Close()
	a, _ := p.Bind(engine.Spec{ID: "r", Name: "r", Limit: 1, Burst: 5})
	b, err := p.Bind(engine.Spec{ID: "r", Name: "r", Limit: 2, Burst: 8})
	if err != nil || a != b {
		t.Fatalf("Bind of a Retuner with a new limit = %p, %v; want the bound one (%p)", b, err, a)
	}
	if _, err := p.Bind(engine.Spec{ID: "r", Name: "r", Limit: 0, Burst: 8}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Bind with Limit 0 = %v, want ErrInvalidConfig", err)
	}
	if a.Limit() != 1 || a.Burst() != 5 || p.Len() != 1 {
		t.Errorf("after Binds: limit %v burst %v, %d bound; want 1, 5, 1: Bind changes nothing", a.Limit(), a.Burst(), p.Len())
	}
}

// A Limiter that cannot retune gets a Limiter of its own for a new limit,
// beside the old one until that is released.
func TestPoolNonRetunerSplitsByLimit(t *testing.T) {
	opened := 0
	p := engine.NewPool(func(s engine.Spec) (engine.Limiter, error) {
		opened++
		e, err := engine.New(engine.Config{Limit: s.Limit, Burst: s.Burst, SweepInterval: -1})
		return fixed{e}, err
	})
	defer p.Close()
	a, _ := p.Bind(engine.Spec{ID: "x", Limit: 1, Burst: 5})
	b, _ := p.Bind(engine.Spec{ID: "x", Limit: 2, Burst: 5})
	c, _ := p.Bind(engine.Spec{ID: "x", Limit: 2, Burst: 5})
	if a == b || b != c || opened != 2 || p.Len() != 2 {
		t.Errorf("binds: a=%p b=%p c=%p opened %d bound %d; want b shared, a apart, 2 opened", a, b, c, opened, p.Len())
	}
	if _, err := p.Bind(engine.Spec{ID: "y", Name: "bad", Limit: 1, Burst: 0.5}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Bind with Burst 0.5 = %v, want ErrInvalidConfig", err)
	}
}

// fixed hides the Engine's Retuner and TakerAt methods.
type fixed struct{ e *engine.Engine }

func (f fixed) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	return f.e.Take(ctx, key, n)
}
func (f fixed) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	return f.e.TakeAll(ctx, takes, out)
}
func (f fixed) Limit() engine.Limit { return f.e.Limit() }
func (f fixed) Burst() float64      { return f.e.Burst() }
func (f fixed) Close() error        { return f.e.Close() }

// A store's quota limiter is shared by the Binds of its ID as a Quota is:
// by its QuotaRetuner methods, not its type; and never with a token
// bucket whose Limit and Burst happen to be its own.
func TestPoolSharesAnyQuotaRetuner(t *testing.T) {
	opened := 0
	p := engine.NewPool(func(s engine.Spec) (engine.Limiter, error) {
		opened++
		if s.Calendar == nil {
			return engine.New(engine.Config{Limit: s.Limit, Burst: s.Burst, SweepInterval: -1})
		}
		q, err := engine.NewQuota(engine.QuotaConfig{Quota: s.Burst, Calendar: *s.Calendar, SweepInterval: -1})
		return storeQuota{q}, err
	})
	defer p.Close()
	spec := engine.QuotaSpec("d", "d", 10, engine.Calendar{Period: engine.Daily})
	a, _ := p.Bind(spec)
	b, err := p.Bind(engine.QuotaSpec("d", "d", 20, engine.Calendar{Period: engine.Weekly}))
	if err != nil || a != b || opened != 1 {
		t.Fatalf("a changed quota: %v, shared %v, opened %d; want the limiter shared, 1 opened", err, a == b, opened)
	}
	c, _ := p.Bind(engine.Spec{ID: "d", Limit: spec.Limit, Burst: spec.Burst})
	if c == a || opened != 2 {
		t.Errorf("a token bucket of the quota's Limit and Burst shared the quota (opened %d)", opened)
	}
}

// storeQuota is a quota limiter of another type than *engine.Quota.
type storeQuota struct{ *engine.Quota }

// A store's window limiter is shared by the Binds of its ID as a Window
// is: by its WindowRetuner methods, not its type, with the same span and
// slots; a window of another span is apart, and never shared with a token
// bucket whose Limit and Burst happen to be its own.
func TestPoolSharesAnyWindowRetuner(t *testing.T) {
	opened := 0
	p := engine.NewPool(func(s engine.Spec) (engine.Limiter, error) {
		opened++
		if s.Window == 0 {
			return engine.New(engine.Config{Limit: s.Limit, Burst: s.Burst, SweepInterval: -1})
		}
		w, err := engine.NewWindow(engine.WindowConfig{Limit: s.Burst, Window: s.Window, Slots: s.Slots, SweepInterval: -1})
		return storeWindow{w}, err
	})
	defer p.Close()
	spec := engine.WindowSpec("w", "w", 10, time.Minute, 0)
	a, _ := p.Bind(spec)
	b, err := p.Bind(engine.WindowSpec("w", "w", 20, time.Minute, 16))
	if err != nil || a != b || opened != 1 {
		t.Fatalf("a changed limit: %v, shared %v, opened %d; want the limiter shared, 1 opened", err, a == b, opened)
	}
	if _, err := p.Bind(engine.WindowSpec("w", "w", 0, time.Minute, 16)); err == nil {
		t.Error("a shared window bound a limit of 0")
	}
	c, _ := p.Bind(engine.WindowSpec("w", "w", 10, time.Minute, 4))
	d, _ := p.Bind(engine.Spec{ID: "w", Limit: spec.Limit, Burst: spec.Burst})
	if c == a || d == a || d == c || opened != 3 {
		t.Errorf("other slots or a token bucket shared the window (opened %d, want 3)", opened)
	}
}

// storeWindow is a window limiter of another type than *engine.Window.
type storeWindow struct{ *engine.Window }
