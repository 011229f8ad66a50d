package grpclimit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/grpclimit"
	"github.com/faucetgo/faucet/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// waitFor polls cond every millisecond, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s after 10 s", what)
		}
	}
}

// smooth spaces calls 50 ms apart, making a call wait up to 2 s.
const smooth = `{"rules": [{"name": "smooth", "limit_keys": ["ip:address"],
	"algorithm_config": {"rps": 20, "burst": 1}, "delay": {"max_delay": "2s"}}]}`

// slack absorbs the rounding of the engine's token quanta in the bounds on
// when a call may reach its handler.
const slack = 2 * time.Millisecond

// Five calls over a rate of 20 a second with a burst of 1, each made once
// the one before it was admitted, all pass, and the k-th reaches its
// handler no sooner than k times 50 ms after the first was made: in the
// order admitted, at the rate. (Only lower bounds: a loaded machine may
// wake a call after its turn, never before it.)
func TestDelayedCallsWaitTheirTurn(t *testing.T) {
	conn, c := serveCalls(t, smooth, httplimit.Options{})
	arrived := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.arrived)
	}
	results := make(chan error, 5)
	t0 := time.Now()
	for k := range 5 {
		go func() { results <- invoke(context.Background(), conn, "n", fmt.Sprint(k)) }()
		// Call k is decided, so admitted before k+1 is made, once calls 0
		// to k all wait or arrived: arrivals are read first, so that a
		// call going from one to the other is not counted twice.
		waitFor(t, fmt.Sprintf("decision on call %d", k), func() bool {
			n := arrived()
			return int64(n)+c.m.DelayStats().Waiting >= int64(k+1)
		})
	}
	for range 5 {
		if err := receive(t, results, "delayed call's end"); err != nil {
			t.Errorf("delayed call: %v, want OK", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range 5 {
		at, ok := c.arrived[fmt.Sprint(k)]
		if want := time.Duration(k) * 50 * time.Millisecond; !ok || at.Sub(t0) < want-slack {
			t.Errorf("call %d reached its handler %v after the first was made (arrived %v), want at least %v", k, at.Sub(t0), ok, want)
		}
	}
	// A machine so slow that each call was made after its turn waits for
	// none: the bounds above hold all the same.
	t.Logf("%d of 4 calls waited", c.m.Stats()[0].Delayed)
}

// Five calls made at once over the same rule all pass, and reach their
// handlers no faster than the rate: the i-th to arrive no sooner than i
// times 50 ms after they were made, whichever call it is.
func TestDelayedCallsAtOnce(t *testing.T) {
	conn, c := serveCalls(t, smooth, httplimit.Options{})
	results := make(chan error, 5)
	t0 := time.Now()
	for k := range 5 {
		go func() { results <- invoke(context.Background(), conn, "n", fmt.Sprint(k)) }()
	}
	for range 5 {
		if err := receive(t, results, "delayed call's end"); err != nil {
			t.Errorf("delayed call: %v, want OK", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var arrivals []time.Duration
	for _, at := range c.arrived {
		arrivals = append(arrivals, at.Sub(t0))
	}
	slices.Sort(arrivals)
	for i, at := range arrivals {
		if want := time.Duration(i) * 50 * time.Millisecond; at < want-slack {
			t.Errorf("arrival %d at %v after the calls were made, want at least %v (all: %v)", i, at, want, arrivals)
		}
	}
}

// oneEvery5s is a rule whose token refills in 5 s, in delay mode: a call
// after the first waits up to 5 s.
const oneEvery5s = `{"rules": [{"name": "slow", "limit_keys": ["ip:address"],
	"algorithm_config": {"rps": 0.2, "burst": 1}, "delay": {"max_delay": "20s"}}]}`

// A call whose deadline passes while it waits never reaches its handler,
// and gives its tokens back: the next waits as if it had not been made.
func TestDeadlineWhileWaiting(t *testing.T) {
	conn, c := serveCalls(t, oneEvery5s, httplimit.Options{})
	if err := invoke(context.Background(), conn, "n", "first"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := invoke(ctx, conn, "n", "late"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a call due in 5 s with a deadline in 100 ms: %v, want DeadlineExceeded", err)
	}
	waitFor(t, "cancelled wait", func() bool { return c.m.DelayStats().Cancelled == 1 })
	// Without the late call's token back, the next token is due in 10 s
	// from the first call; with it, in 5 s.
	if res := checkCall(c.m); !res.Allowed || res.Delay > 5*time.Second {
		t.Errorf("a call after the late one gave its token back: allowed %v, delay %v, want at most 5 s", res.Allowed, res.Delay)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.arrived["late"]; ok {
		t.Errorf("the late call reached its handler")
	}
}

// On the server's side, a call whose context ends while it waits is
// Canceled or DeadlineExceeded, as its context says, and its handler never
// runs; a call that would wait while Options.MaxWaiting calls wait already
// is ResourceExhausted with a RetryInfo.
func TestWaitStatuses(t *testing.T) {
	rules, err := httplimit.ParseRules([]byte(oneEvery5s))
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(rules, httplimit.Options{MaxWaiting: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	intercept := grpclimit.New(m, grpclimit.Options{}).UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/s/M"}
	handled := 0
	handler := func(context.Context, any) (any, error) { handled++; return "done", nil }
	if _, err := intercept(context.Background(), nil, info, handler); err != nil || handled != 1 {
		t.Fatalf("first call: %v, handled %d", err, handled)
	}

	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	go func() {
		_, err := intercept(ctx, nil, info, func(context.Context, any) (any, error) { return "done", nil })
		waiting <- err
	}()
	waitFor(t, "waiting call", func() bool { return m.DelayStats().Waiting == 1 })
	_, err = intercept(context.Background(), nil, info, handler)
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), httplimit.ReasonDelayFull) {
		t.Errorf("a call that would wait while MaxWaiting calls wait: %v, want ResourceExhausted (%s)", err, httplimit.ReasonDelayFull)
	}
	if d := retryDelay(err); d < time.Second {
		t.Errorf("delay_full denial with RetryInfo %v, want at least 1 s", d)
	}
	cancel()
	if err := receive(t, waiting, "cancelled call's end"); status.Code(err) != codes.Canceled {
		t.Errorf("call cancelled while it waited: %v, want Canceled", err)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	if _, err := intercept(dctx, nil, info, handler); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("call whose deadline passed while it waited: %v, want DeadlineExceeded", err)
	}
	if handled != 1 {
		t.Errorf("%d calls reached the handler, want the first only", handled)
	}
}
