package httplimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

// fallbackStore is a memory store whose Limiters, while down is set, fail
// and answer from a fallback engine at half the limit, as redisstore's and
// pgstore's do.
type fallbackStore struct {
	*engine.Pool
	down atomic.Bool
}

type fallbackLimiter struct {
	e, fb *engine.Engine
	down  *atomic.Bool
}

func newFallbackStore() *fallbackStore {
	s := &fallbackStore{}
	s.Pool = engine.NewPool(func(spec engine.Spec) (engine.Limiter, error) {
		e, err := engine.New(engine.Config{Limit: spec.Limit, Burst: spec.Burst})
		if err != nil {
			return nil, err
		}
		fb, err := engine.New(engine.Config{Limit: spec.Limit / 2, Burst: spec.Burst / 2})
		if err != nil {
			return nil, err
		}
		return &fallbackLimiter{e: e, fb: fb, down: &s.down}, nil
	})
	return s
}

func (f *fallbackLimiter) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	var out [1]engine.Decision
	_, err := f.TakeAll(ctx, []engine.Take{{Limiter: f, Key: key, N: n}}, out[:])
	return out[0], err
}

func (f *fallbackLimiter) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	down := f.down.Load()
	inner := make([]engine.Take, len(takes))
	for i, tk := range takes {
		inner[i] = tk
		in := tk.Limiter.(*fallbackLimiter)
		inner[i].Limiter = in.e
		if down {
			inner[i].Limiter = in.fb
		}
	}
	k, err := inner[0].Limiter.TakeAll(ctx, inner, out)
	if err == nil && down {
		err = fmt.Errorf("store unreachable: %w: %w", engine.ErrFallback, engine.ErrUnavailable)
	}
	return k, err
}

func (f *fallbackLimiter) Limit() engine.Limit { return f.e.Limit() }
func (f *fallbackLimiter) Burst() float64      { return f.e.Burst() }
func (f *fallbackLimiter) Close() error        { f.fb.Close(); return f.e.Close() }

// With the store down, a rule without a fail_mode is decided by the
// store's fallback (half its burst here) rather than lifted, and the
// answer says so; "open" still admits, "closed" still refuses; and a store
// with no fallback makes a default rule refuse rather than admit.
func TestFailModeFallbackIsTheDefault(t *testing.T) {
	doc := `{"rules":[
	 {"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":0.001,"burst":4}},
	 {"name":"pay","limit_keys":["path"],"match":{"path_prefix":"/pay/"},"fail_mode":"closed","algorithm_config":{"rps":1,"burst":100}},
	 {"name":"open","limit_keys":["header:x-tenant"],"match":{"path_prefix":"/open/"},"fail_mode":"open","algorithm_config":{"rps":0.001,"burst":2}}]}`
	store := newFallbackStore()
	defer store.Close()
	l, _ := newLimiter(t, doc, httplimit.Options{Store: store})
	defer l.Close()
	store.down.Store(true)
	var got []int
	for range 4 {
		res := l.Check(req("192.0.2.1:1", "/home"))
		got = append(got, res.Status)
		if !res.StoreError || len(res.Policies) != 1 || !res.Policies[0].Fallback || res.Policies[0].Unknown {
			t.Errorf("fallback answer: %+v, want store_error and a fallback policy", res)
		}
	}
	if fmt.Sprint(got) != "[200 200 429 429]" {
		t.Errorf("default rule, store down: statuses %v, want the fallback's burst of 2 then 429", got)
	}
	if st := l.Stats(); st[0].Fallback != 4 || st[0].Allowed != 2 || st[0].Denied != 2 || st[0].FailedOpen != 0 {
		t.Errorf("per-ip stats %+v, want 4 fallback decisions: 2 allowed, 2 denied", st[0])
	}
	if res := l.Check(req("192.0.2.2:1", "/pay/x")); res.Status != 503 || res.Reason != httplimit.ReasonStoreUnavailable || !res.StoreError {
		t.Errorf("fail_mode closed, store down: %+v, want 503 store_unavailable", res)
	}
	// The open rule's fallback bucket (burst 1) runs dry after one
	// request; it must not deny the requests the per-ip rule's fallback
	// still admits (burst 2 per address).
	got = got[:0]
	for range 3 {
		r := req("192.0.2.3:1", "/open/x")
		r.Header.Set("X-Tenant", "t1")
		res := l.Check(r)
		got = append(got, res.Status)
		if !res.StoreError || !res.Policies[1].Unknown || res.Policies[1].Denied {
			t.Errorf("open rule, store down: %+v, want it unknown and not denying", res.Policies)
		}
	}
	if fmt.Sprint(got) != "[200 200 429]" {
		t.Errorf("open rule beside a fallback rule: statuses %v, want [200 200 429] (the per-ip fallback decides)", got)
	}
	store.down.Store(false)
	if res := l.Check(req("192.0.2.9:1", "/home")); res.Status != 200 || res.StoreError || res.Policies[0].Fallback {
		t.Errorf("store back: %+v", res)
	}
}

// A store that fails without a fallback decision refuses a request under a
// default rule: no default turns the limit off.
func TestFailModeFallbackWithoutFallbackRefuses(t *testing.T) {
	store := newBrokenStore()
	defer store.Close()
	l, _ := newLimiter(t, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":1,"burst":10}}]}`,
		httplimit.Options{Store: store})
	defer l.Close()
	store.down.Store(true)
	if res := l.Check(req("192.0.2.1:1", "/")); res.Status != 503 || !res.StoreError || res.Policies[0].Fallback {
		t.Errorf("store down, no fallback: %+v, want 503", res)
	}
	if st := l.Stats(); st[0].FailedClosed != 1 || st[0].FailedOpen != 0 {
		t.Errorf("stats %+v", st[0])
	}
}
