package remote

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
)

var errInvalid = errors.New("somestore: invalid config")

// Each check names its field and range after the store's ErrInvalidConfig,
// and applies its defaults.
func TestSettingsChecks(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{Limit: 0, Burst: 1}, "somestore: invalid config: "},
		{Settings{Limit: 1, Burst: 1, Timeout: -time.Second}, "somestore: invalid config: Timeout must be 0 (default 100ms) or positive, got -1s"},
		{Settings{Limit: 1, Burst: 1, BreakFor: -time.Second}, "somestore: invalid config: BreakFor must be 0 (default 1s) or positive, got -1s"},
		{Settings{Limit: 1, Burst: 1, FallbackShare: 0.5}, "somestore: invalid config: FallbackShare must be 0 unless OnFailure is Fallback, got 0.5"},
	} {
		s := tc.s
		s.Invalid = errInvalid
		err := Check(s.CheckLimit, s.CheckTimeout, s.CheckBreaker, s.CheckFailure)
		if err == nil || !errors.Is(err, errInvalid) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
	s := Settings{Invalid: errInvalid, Limit: 10, Burst: 20, OnFailure: failpolicy.Fallback, FallbackShare: 0.5}
	if err := s.CheckLimit(); err != nil {
		t.Fatal(err)
	}
	if err := Check(s.CheckTimeout, s.CheckBreaker, s.CheckFailure); err != nil {
		t.Fatal(err)
	}
	if s.Timeout != DefaultTimeout || s.BreakAfter != DefaultBreakAfter || s.BreakFor != DefaultBreakFor || s.FallbackConfig.Limit != 5 || s.FallbackConfig.Burst != 10 {
		t.Errorf("defaults not applied: %+v", s)
	}
	if err := (&Settings{Invalid: errInvalid, Limit: -1, Burst: 1}).CheckLimit(); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("a bad limit: %v, want it to wrap engine.ErrInvalidConfig", err)
	}
}

func newCore(t *testing.T, s Settings) *Core {
	t.Helper()
	s.Invalid = errInvalid
	if err := Check(s.CheckLimit, s.CheckTimeout, s.CheckBreaker, s.CheckFailure); err != nil {
		t.Fatal(err)
	}
	c, err := NewCore(s, errBreakerOpen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var errBreakerOpen = errors.New("somestore: breaker open")

// Call bounds the call by Timeout, opens the breaker after BreakAfter
// failures and then calls nothing, and counts calls and skips.
func TestCall(t *testing.T) {
	c := newCore(t, Settings{Limit: 1, Burst: 1, Timeout: time.Hour, BreakAfter: 2, BreakFor: time.Hour})
	down := errors.New("down")
	var deadline time.Time
	fail := func(ctx context.Context) error { deadline, _ = ctx.Deadline(); return down }
	for range 2 {
		if err := c.Call(context.Background(), fail, nil); err != down {
			t.Fatalf("Call = %v, want do's error", err)
		}
	}
	if d := time.Until(deadline); d <= 0 || d > time.Hour {
		t.Errorf("the call's deadline is %v away, want Timeout (1h)", d)
	}
	called := false
	err := c.Call(context.Background(), func(context.Context) error { called = true; return nil }, nil)
	if called || !errors.Is(err, errBreakerOpen) || !IsUnsent(err) {
		t.Errorf("open breaker: called %v, %v; want nothing called and an Unsent ErrBreakerOpen", called, err)
	}
	if c.Counters.Calls.Load() != 2 || c.Counters.Skipped.Load() != 1 {
		t.Errorf("calls %d, skipped %d; want 2 and 1", c.Counters.Calls.Load(), c.Counters.Skipped.Load())
	}
}

// A caller's earlier deadline stands; an ended context calls nothing; an
// error that counts says nothing leaves the breaker closed.
func TestCallCallerAndCounts(t *testing.T) {
	c := newCore(t, Settings{Limit: 1, Burst: 1, Timeout: time.Hour, BreakAfter: 1, BreakFor: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var deadline time.Time
	c.Call(ctx, func(ctx context.Context) error { deadline, _ = ctx.Deadline(); return nil }, nil)
	if want, _ := ctx.Deadline(); !deadline.Equal(want) {
		t.Errorf("deadline %v, want the caller's %v", deadline, want)
	}
	ended, end := context.WithCancel(context.Background())
	end()
	called := false
	if err := c.Call(ended, func(context.Context) error { called = true; return nil }, nil); called || !IsUnsent(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: called %v, %v; want nothing called, Unsent", called, err)
	}
	if c.Breaker.Open() {
		t.Error("a caller that gave up opened the breaker")
	}
	c.Call(context.Background(), func(context.Context) error { return errors.New("row locked") }, func(error) bool { return false })
	if c.Breaker.Open() {
		t.Error("an error that does not count opened the breaker")
	}
	c.Call(context.Background(), func(context.Context) error { return errors.New("down") }, func(error) bool { return true })
	if !c.Breaker.Open() {
		t.Error("an error that counts did not open the breaker (BreakAfter 1)")
	}
}

type otherLimiter struct{ *engine.Engine }

func TestCheckTakes(t *testing.T) {
	a, _ := engine.New(engine.Config{Limit: 1, Burst: 1})
	b, _ := engine.New(engine.Config{Limit: 1, Burst: 1})
	defer a.Close()
	defer b.Close()
	var nilEngine *engine.Engine
	onA := func(e *engine.Engine) string {
		if e != a {
			return "another engine"
		}
		return ""
	}
	out := make([]engine.Decision, 2)
	for _, tc := range []struct {
		takes []engine.Take
		out   []engine.Decision
		want  error
		msg   string
	}{
		{[]engine.Take{{Limiter: a}, {Limiter: a}}, out, nil, ""},
		{[]engine.Take{{Limiter: a}, {Limiter: a}}, out[:1], engine.ErrShortOut, "2 takes, 1 decisions"},
		{[]engine.Take{{Limiter: a}, {}}, out, engine.ErrNilLimiter, "takes[1]"},
		{[]engine.Take{{Limiter: nilEngine}}, out, engine.ErrNilLimiter, "takes[0]"},
		{[]engine.Take{{Limiter: otherLimiter{a}}}, out, engine.ErrForeignTake, "takes[0] is a remote.otherLimiter, not a *engine.Engine"},
		{[]engine.Take{{Limiter: a}, {Limiter: b}}, out, engine.ErrForeignTake, "takes[1] is a Limiter on another engine"},
	} {
		err := CheckTakes("somestore", a, tc.takes, tc.out, onA)
		if tc.want == nil && err != nil || tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("%v: %v, want %v with %q", tc.takes, err, tc.want, tc.msg)
		}
	}
	if err := CheckTakes("somestore", nilEngine, nil, nil, onA); err != engine.ErrNilLimiter {
		t.Errorf("a nil Limiter's TakeAll: %v, want engine.ErrNilLimiter", err)
	}
}

// Fail answers by each take's policy and counts each take in its own core.
func TestFail(t *testing.T) {
	open := newCore(t, Settings{Limit: 1, Burst: 5})
	closed := newCore(t, Settings{Limit: 1, Burst: 5, OnFailure: failpolicy.FailClosed, Timeout: time.Second})
	fb := newCore(t, Settings{Limit: 1, Burst: 5, OnFailure: failpolicy.Fallback, FallbackShare: 1})
	cores := map[string]*Core{"open": open, "closed": closed, "fallback": fb}
	coreOf := func(tk *engine.Take) *Core { return cores[tk.Key] }
	out := make([]engine.Decision, 3)
	if k, all := Fail([]engine.Take{{Key: "open", N: 1}, {Key: "closed", N: 1}}, out, coreOf); k != 1 || all || out[1].RetryAfter != time.Second {
		t.Errorf("open and closed: %d %v %+v", k, all, out[:2])
	}
	if k, all := Fail([]engine.Take{{Key: "fallback", N: 1}}, out, coreOf); k != -1 || !all || !out[0].Allowed || fb.Fallback.Len() != 1 {
		t.Errorf("fallback: %d %v %+v", k, all, out[0])
	}
	for name, c := range cores {
		if c.Counters.StoreErrors.Load() != 1 {
			t.Errorf("%s: %d store errors, want 1", name, c.Counters.StoreErrors.Load())
		}
	}
	if open.Counters.FailedOpen.Load() != 1 || closed.Counters.FailedClosed.Load() != 1 || fb.Counters.Fallback.Load() != 1 {
		t.Error("a take not counted by the policy that answered it")
	}
}

func TestConn(t *testing.T) {
	self := new(int)
	if c := Conn("a client", self); c != "a client" {
		t.Errorf("a comparable conn: %v", c)
	}
	if c := Conn([]int{1}, self); c != self {
		t.Errorf("a conn that cannot be compared: %v, want self", c)
	}
	if c := Conn(nil, self); c != self {
		t.Errorf("a nil conn: %v, want self", c)
	}
}

// The heartbeat records its counts in Peers, and Stop ends every loop.
func TestBackground(t *testing.T) {
	b := NewBackground()
	var beats atomic.Int64
	b.Heartbeat(time.Millisecond, time.Second, func(every time.Duration) failpolicy.Beat {
		if every != time.Millisecond {
			t.Errorf("beat every %v, want 1ms", every)
		}
		return func(context.Context) (int, error) { beats.Add(1); return 3, nil }
	})
	stopped := make(chan struct{})
	b.Go(func(stop <-chan struct{}) { <-stop; close(stopped) })
	for deadline := time.Now().Add(10 * time.Second); !b.Peers().Known() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := b.Peers().N(); n != 3 {
		t.Errorf("Peers().N() = %d, want the heartbeat's 3", n)
	}
	b.Stop()
	b.Stop()
	select {
	case <-stopped:
	default:
		t.Error("Stop returned before the loop did")
	}
	n := beats.Load()
	time.Sleep(5 * time.Millisecond)
	if beats.Load() != n {
		t.Error("the heartbeat beats after Stop")
	}
	none := NewBackground()
	none.Heartbeat(-1, time.Second, func(time.Duration) failpolicy.Beat {
		t.Error("a negative Heartbeat started one")
		return nil
	})
	none.Stop()
}
