package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

// Errors are classified as engine.Limiter documents: ErrUnavailable when
// nothing was taken for certain, ErrOutcomeUnknown when the store may have
// taken the tokens, and ErrFallback beside either when the local engines
// decided.

// class names the classes err wraps, and fails unless it wraps exactly one
// of ErrUnavailable and ErrOutcomeUnknown.
func class(t *testing.T, err error) error {
	t.Helper()
	u, o := errors.Is(err, engine.ErrUnavailable), errors.Is(err, engine.ErrOutcomeUnknown)
	switch {
	case u && !o:
		return engine.ErrUnavailable
	case o && !u:
		return engine.ErrOutcomeUnknown
	}
	t.Fatalf("error %v: unavailable %v, outcome unknown %v; want exactly one", err, u, o)
	return nil
}

// A refused connection takes nothing: with go-redis, which dials on
// demand, and with rueidis once its connection to a killed server is gone.
func TestRefusedIsUnavailable(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	g, err := NewGoRedis(newGoRedisNoT(dead), Config{Limit: 1, Burst: 10, Timeout: 5 * time.Second, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := g.Take(context.Background(), "k", 1)
	if class(t, err) != engine.ErrUnavailable || d.Allowed || errors.Is(err, engine.ErrFallback) {
		t.Errorf("go-redis, nothing listening: %+v, %v; want FailClosed's denial, unavailable", d, err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Errorf("the error %v does not keep the dial error", err)
	}
	// A go-redis client that retries may have sent the script on an
	// earlier attempt: its last error cannot tell.
	retrying := redis.NewClient(&redis.Options{Addr: dead, ContextTimeoutEnabled: true})
	t.Cleanup(func() { retrying.Close() })
	gr, err := NewGoRedis(retrying, Config{Limit: 1, Burst: 10, Timeout: 5 * time.Second, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gr.Take(context.Background(), "k", 1); class(t, err) != engine.ErrOutcomeUnknown {
		t.Errorf("go-redis with retries, nothing listening: %v; want outcome unknown", err)
	}

	s := redistest.Start(t)
	r, err := New(newRue(t, s.Addr()), Config{Limit: 1, Burst: 10, Timeout: 5 * time.Second, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, r, "k")
	s.Kill()
	// The first calls may find the connection broken under them (EOF:
	// outcome unknown); then the client redials and is refused.
	for i := 0; ; i++ {
		_, err := r.Take(context.Background(), "k", 1)
		if err == nil {
			t.Fatal("no error with the server killed")
		}
		if class(t, err) == engine.ErrUnavailable {
			break
		}
		if i == 20 {
			t.Fatalf("20 calls to a killed server, none unavailable; last: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The open breaker sends nothing.
func TestBreakerIsUnavailable(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	l, err := NewGoRedis(newGoRedisNoT(dead), Config{Limit: 1, Burst: 10, Timeout: 5 * time.Second, BreakAfter: 1, BreakFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l.Take(context.Background(), "k", 1)
	d, err := l.Take(context.Background(), "k", 1)
	if !errors.Is(err, ErrBreakerOpen) || class(t, err) != engine.ErrUnavailable || !d.Allowed {
		t.Fatalf("with the breaker open: %+v, %v; want FailOpen's answer, ErrBreakerOpen, unavailable", d, err)
	}
	out := make([]engine.Decision, 2)
	_, err = l.TakeAll(context.Background(), []engine.Take{{Limiter: l, Key: "{a}", N: 1}, {Limiter: l, Key: "{b}", N: 1}}, out)
	if !errors.Is(err, ErrBreakerOpen) || class(t, err) != engine.ErrUnavailable {
		t.Fatalf("TakeAll across slots with the breaker open: %v; want ErrBreakerOpen, unavailable", err)
	}
	if st := l.Stats(); st.Skipped != 2 {
		t.Fatalf("stats %+v, want 2 scripts skipped", st)
	}
}

// Callers that give up do not open the breaker: a client could otherwise
// lift the limit of every key by aborting its requests.
func TestCancelledCallersDoNotBreak(t *testing.T) {
	s := redistest.Start(t)
	l, err := New(newRue(t, s.Addr()), Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second, BreakAfter: 2, BreakFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		if _, err := l.Take(gone, "k", 1); err == nil {
			t.Fatal("a take with a cancelled context succeeded")
		}
	}
	if d, err := l.Take(context.Background(), "k", 1); err != nil || !d.Allowed {
		t.Fatalf("after cancelled callers: %+v %v, want the breaker closed", d, err)
	}
}

// A context that ended before the call sends nothing.
func TestDoneContextIsUnavailable(t *testing.T) {
	s := redistest.Start(t)
	l, err := New(newRue(t, s.Addr()), Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := l.Take(ctx, "k", 1)
	if class(t, err) != engine.ErrUnavailable || !errors.Is(err, context.Canceled) || d.Allowed {
		t.Fatalf("done context: %+v, %v; want FailClosed's denial, unavailable, context.Canceled", d, err)
	}
	out := make([]engine.Decision, 2)
	if _, err := l.TakeAll(ctx, []engine.Take{{Limiter: l, Key: "{a}", N: 1}, {Limiter: l, Key: "{b}", N: 1}}, out); class(t, err) != engine.ErrUnavailable {
		t.Fatalf("TakeAll with a done context: %v; want unavailable", err)
	}
	if left, err := l.Tokens(context.Background(), "k"); err != nil || left != 10 {
		t.Fatalf("bucket holds %v (%v), want 10", left, err)
	}
	if st := l.Stats(); st.Scripts != 1 {
		t.Fatalf("stats %+v, want only Tokens' script sent", st)
	}
}

// A reply that never comes (a server that accepts and stays silent, or
// replies held past the deadline) is an unknown outcome: the script may
// have run, and through the proxy it did.
func TestSilentServerIsOutcomeUnknown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns sync.WaitGroup
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	})
	g, err := NewGoRedis(newGoRedisNoT(ln.Addr().String()), Config{Limit: 1, Burst: 10, Timeout: 200 * time.Millisecond, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := g.Take(context.Background(), "k", 1); class(t, err) != engine.ErrOutcomeUnknown || d.Allowed {
		t.Fatalf("silent server: %+v, %v; want FailClosed's denial, outcome unknown", d, err)
	}
	// A peek takes nothing, whatever became of it.
	if _, err := g.Take(context.Background(), "k", 0); class(t, err) != engine.ErrUnavailable {
		t.Fatalf("silent server, a peek: %v; want unavailable", err)
	}

	s := redistest.Start(t)
	p := newSlowProxy(t, s.Addr())
	// A deadline of a second, a reply held three.
	l, err := New(newRue(t, p.addr()), Config{Limit: 1.0 / 3600, Burst: 10, Timeout: time.Second, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := New(newRue(t, s.Addr()), Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Load the script first: a held NOSCRIPT reply would stop the client
	// before it sends the script itself.
	waitHealthy(t, l, "warm")
	// On a machine loaded with the whole suite the deadline can pass
	// before the client has written the script (then the take did not
	// run, which outcome unknown allows, and the round shows nothing): a
	// round counts only if the proxy forwarded the script before the
	// deadline, and up to five are made.
	ran := false
	for round := range 5 {
		key := fmt.Sprintf("held-%d", round)
		p.delay.Store(int64(3 * time.Second))
		_, err := l.Take(context.Background(), key, 3)
		sent := p.forwarded(key)
		p.delay.Store(0)
		if class(t, err) != engine.ErrOutcomeUnknown {
			t.Fatalf("held reply: %v; want outcome unknown", err)
		}
		if !sent {
			continue
		}
		// The script reached the server's socket: it runs.
		deadline := time.Now().Add(10 * time.Second)
		for {
			left, err := direct.Tokens(context.Background(), key)
			if err == nil && left <= 7.01 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("bucket holds %v (%v) after 10 s: the take whose reply was held did not run, want about 7", left, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		ran = true
		break
	}
	if !ran {
		t.Fatal("in 5 rounds the client never sent the take within its 1 s deadline")
	}
	ln.Close()
	conns.Wait()
}

// Redis refusing the script before running it (BUSY: another script runs)
// is unavailable.
func TestBusyIsUnavailable(t *testing.T) {
	s := redistest.Start(t, "--busy-reply-threshold", "10")
	r, err := New(newRue(t, s.Addr()), Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	gc := newGoRedisNoT(s.Addr()) // without retries: see NewGoRedis
	t.Cleanup(func() { gc.Close() })
	g, err := NewGoRedis(gc, Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, r, "k")
	waitHealthy(t, g, "k")
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := newGoRedisNoT(s.Addr())
		defer c.Close()
		// Spins for a second of the server's time (or a bounded count).
		c.Eval(context.Background(), `local s = tonumber(redis.call('TIME')[1]); local i = 0
while i < 1e8 and tonumber(redis.call('TIME')[1]) - s < 2 do i = i + 1 end return i`, nil)
	}()
	for !serverBusy(s.Addr()) {
		time.Sleep(time.Millisecond)
	}
	for _, l := range []*Limiter{r, g} {
		d, err := l.Take(context.Background(), "k", 1)
		if class(t, err) != engine.ErrUnavailable || d.Allowed {
			t.Errorf("%T while a script runs: %+v, %v; want FailClosed's denial, unavailable (BUSY)", l.c, d, err)
		}
	}
	<-done
	for _, l := range []*Limiter{r, g} {
		if left, err := l.Tokens(context.Background(), "k"); err != nil || left != 10 {
			t.Errorf("%T: bucket holds %v (%v), want 10", l.c, left, err)
		}
	}
}

// With OnFailure Fallback the local engine decides, and the error says so.
func TestFallbackErrors(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	c := goRedisClient{newGoRedisNoT(dead)}
	t.Cleanup(func() { c.c.Close() })
	mk := func(p FailurePolicy, share float64) *Limiter {
		l, err := newLimiter(c, Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second, OnFailure: p, FallbackShare: share, BreakAfter: 1, BreakFor: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	fb, fb2, open := mk(Fallback, 0.5), mk(Fallback, 1), mk(FailOpen, 0)
	for i := range 6 {
		d, err := fb.Take(context.Background(), "k", 1)
		if !errors.Is(err, engine.ErrFallback) || class(t, err) != engine.ErrUnavailable || d.Allowed != (i < 5) {
			t.Fatalf("take %d: %+v, %v; want the local engine's decision (5 tokens), ErrFallback, unavailable", i, d, err)
		}
	}
	out := make([]engine.Decision, 2)
	k, err := fb.TakeAll(context.Background(), []engine.Take{{Limiter: fb, Key: "j", N: 1}, {Limiter: fb2, Key: "j", N: 1}}, out)
	if !errors.Is(err, engine.ErrFallback) || k != -1 || !out[0].Allowed || !out[1].Allowed {
		t.Fatalf("TakeAll of Fallback takes: %d, %+v, %v; want allowed by the local engines, ErrFallback", k, out, err)
	}
	// A FailOpen take's answer is no engine's: the call is not the fallback's.
	_, err = fb.TakeAll(context.Background(), []engine.Take{{Limiter: fb, Key: "j", N: 1}, {Limiter: open, Key: "j", N: 1}}, out)
	if err == nil || errors.Is(err, engine.ErrFallback) {
		t.Fatalf("TakeAll of a Fallback and a FailOpen take: %v; want an error without ErrFallback", err)
	}
	if _, err := open.Take(context.Background(), "k", 1); err == nil || errors.Is(err, engine.ErrFallback) {
		t.Fatalf("FailOpen: %v; want an error without ErrFallback", err)
	}
}

// flakyClient runs scripts through client, except the calls (numbered from
// 1) in refuse, which fail unsent, and in lose, which run but whose replies
// are lost.
type flakyClient struct {
	client
	mu     sync.Mutex
	calls  int
	refuse map[int]bool
	lose   map[int]bool
}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func (f *flakyClient) run(ctx context.Context, s script, keys, args []string) ([]int64, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if f.refuse[n] {
		return nil, errRefused
	}
	v, err := f.client.run(ctx, s, keys, args)
	if f.lose[n] {
		return nil, context.DeadlineExceeded
	}
	return v, err
}

// A TakeAll across slots is unavailable only when no script that failed can
// have taken and every take made was given back.
func TestTakeAllAcrossSlotsClassifies(t *testing.T) {
	s := redistest.Start(t)
	plain := rueClient{newRue(t, s.Addr())}
	for i, tc := range []struct {
		name         string
		refuse, lose map[int]bool
		want         error
		a, b         float64 // left in the buckets afterwards
	}{
		// Call 1 takes a, call 2 takes b, call 3 gives a back.
		{"second take refused, give-back made", map[int]bool{2: true}, nil, engine.ErrUnavailable, 10, 10},
		{"second take's reply lost", nil, map[int]bool{2: true}, engine.ErrOutcomeUnknown, 10, 9},
		{"second take refused, give-back refused", map[int]bool{2: true, 3: true}, nil, engine.ErrOutcomeUnknown, 9, 10},
		{"first take refused", map[int]bool{1: true}, nil, engine.ErrUnavailable, 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flakyClient{client: plain, refuse: tc.refuse, lose: tc.lose}
			cfg := Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second, OnFailure: FailClosed, BreakAfter: -1, Prefix: "flaky" + strconv.Itoa(i) + ":"}
			l, err := newLimiter(f, cfg)
			if err != nil {
				t.Fatal(err)
			}
			check, err := newLimiter(plain, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if slotOf(l.KeyFor("a")) == slotOf(l.KeyFor("b")) {
				t.Fatal("keys share a slot; pick others")
			}
			out := make([]engine.Decision, 2)
			k, err := l.TakeAll(context.Background(), []engine.Take{{Limiter: l, Key: "a", N: 1}, {Limiter: l, Key: "b", N: 1}}, out)
			if class(t, err) != tc.want || k != 0 || out[0].Allowed || out[1].Allowed {
				t.Fatalf("TakeAll: %d, %+v, %v; want FailClosed's denial of take 0, %v", k, out, err, tc.want)
			}
			for key, want := range map[string]float64{"a": tc.a, "b": tc.b} {
				if left, err := check.Tokens(context.Background(), key); err != nil || left < want || left > want+0.01 {
					t.Errorf("%s holds %v (%v), want %v", key, left, err, want)
				}
			}
		})
	}
}

// A Take's Limiter must be a non-nil Limiter on the receiver's client.
func TestTakeAllRefusesForeignTakes(t *testing.T) {
	s := redistest.Start(t)
	c1, c2 := rueClient{newRue(t, s.Addr())}, rueClient{newRue(t, s.Addr())}
	cfg := Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second}
	a, _ := newLimiter(c1, cfg)
	b, _ := newLimiter(c1, Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second, Prefix: "b:"})
	other, _ := newLimiter(c2, Config{Limit: 1.0 / 3600, Burst: 10, Timeout: 5 * time.Second, Prefix: "o:"})
	e, err := engine.New(engine.Config{Limit: 1, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var nilL *Limiter
	out := make([]engine.Decision, 2)
	for _, tc := range []struct {
		name  string
		recv  *Limiter
		takes []engine.Take
		want  error
	}{
		{"nil receiver", nilL, []engine.Take{{Limiter: a, Key: "k", N: 1}}, engine.ErrNilLimiter},
		{"nil Limiter", a, []engine.Take{{Limiter: a, Key: "k", N: 1}, {Key: "k", N: 1}}, engine.ErrNilLimiter},
		{"nil *Limiter", a, []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: nilL, Key: "k", N: 1}}, engine.ErrNilLimiter},
		{"an Engine", a, []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: e, Key: "k", N: 1}}, engine.ErrForeignTake},
		{"another client", a, []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: other, Key: "k", N: 1}}, engine.ErrForeignTake},
		{"only another client's", a, []engine.Take{{Limiter: other, Key: "k", N: 1}}, engine.ErrForeignTake},
		{"short out", a, []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "k", N: 1}, {Limiter: b, Key: "j", N: 1}}, engine.ErrShortOut},
	} {
		if _, err := tc.recv.TakeAll(context.Background(), tc.takes, out); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := nilL.Take(context.Background(), "k", 1); !errors.Is(err, engine.ErrNilLimiter) {
		t.Errorf("nil Take: %v", err)
	}
	if nilL.Allow(context.Background(), "k") {
		t.Error("nil Allow allowed")
	}
	for _, l := range []*Limiter{a, other} {
		if left, err := l.Tokens(context.Background(), "k"); err != nil || left != 10 {
			t.Errorf("bucket holds %v (%v) after refused calls, want 10", left, err)
		}
	}
	// Limiters on one client decide together.
	if k, err := a.TakeAll(context.Background(), []engine.Take{{Limiter: a, Key: "k", N: 1}, {Limiter: b, Key: "k", N: 1}}, out); k != -1 || err != nil {
		t.Errorf("two Limiters on one client: %d, %v", k, err)
	}
}
