package grpclimit_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

const threeInFlight = `{"rules": [{"name": "slots", "limit_keys": ["ip:address"], "algorithm": "concurrency",
	"algorithm_config": {"max_in_flight": 3}}]}`

// Of 16 calls at once under max_in_flight 3, exactly 3 are served at once
// and the 13 others are ResourceExhausted with a RetryInfo; once they end,
// a call passes again.
func TestInFlightUnary(t *testing.T) {
	conn, c := serveCalls(t, threeInFlight, httplimit.Options{})
	results := make(chan error, 16)
	for range 16 {
		go func() { results <- invoke(context.Background(), conn, "do", "block") }()
	}
	for i := range 13 {
		err := receive(t, results, "denial")
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), httplimit.ReasonInFlightExceeded) {
			t.Fatalf("call %d of those that returned while 3 were served: %v, want ResourceExhausted (%s)", i, err, httplimit.ReasonInFlightExceeded)
		}
		if d := retryDelay(err); d < time.Second {
			t.Errorf("in-flight denial with RetryInfo %v, want at least 1 s", d)
		}
	}
	for range 3 {
		receive(t, c.entered, "handler entered")
	}
	if n, most := c.inside.Load(), c.most.Load(); n != 3 || most != 3 {
		t.Errorf("calls inside %d, at most %d, want 3 and 3", n, most)
	}
	if s := c.m.Stats()[0].InFlight; s != 3 {
		t.Errorf("Stats.InFlight = %d with 3 calls served, want 3", s)
	}
	for range 3 {
		c.release <- struct{}{}
	}
	for range 3 {
		if err := receive(t, results, "admitted call's end"); err != nil {
			t.Errorf("admitted call: %v", err)
		}
	}
	if err := invoke(context.Background(), conn); err != nil {
		t.Errorf("a call after the 3 ended: %v, want OK", err)
	}
	if s := c.m.Stats()[0].InFlight; s != 0 {
		t.Errorf("Stats.InFlight = %d after every call ended, want 0", s)
	}
}

// A handler that fails or panics gives its slot back: after 5 of each,
// 3 calls are served at once and a fourth is denied.
func TestInFlightSlotsNotLeaked(t *testing.T) {
	conn, c := serveCalls(t, threeInFlight, httplimit.Options{})
	for i := range 5 {
		if err := invoke(context.Background(), conn, "do", "error"); status.Code(err) != codes.Internal {
			t.Fatalf("failing call %d: %v, want the handler's Internal", i, err)
		}
		if err := invoke(context.Background(), conn, "do", "panic"); status.Code(err) != codes.Internal {
			t.Fatalf("panicking call %d: %v, want the recovered Internal", i, err)
		}
	}
	results := make(chan error, 3)
	for range 3 {
		go func() { results <- invoke(context.Background(), conn, "do", "block") }()
	}
	for range 3 {
		receive(t, c.entered, "handler entered")
	}
	if err := invoke(context.Background(), conn); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a fourth call while 3 are served: %v, want ResourceExhausted", err)
	}
	for range 3 {
		c.release <- struct{}{}
	}
	for range 3 {
		if err := receive(t, results, "admitted call's end"); err != nil {
			t.Errorf("admitted call: %v", err)
		}
	}
	if s := c.m.Stats()[0].InFlight; s != 0 {
		t.Errorf("Stats.InFlight = %d after every call ended, want 0", s)
	}
}

// A stream holds its slot for as long as it is open, whether it ends on
// the server's side or its client cancels it.
func TestInFlightStreamHoldsItsSlot(t *testing.T) {
	conn, c := serveCalls(t, `{"rules": [{"name": "slots", "limit_keys": ["ip:address"], "algorithm": "concurrency",
		"algorithm_config": {"max_in_flight": 1}}]}`, httplimit.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := openWatch(ctx, conn)
	if err != nil {
		t.Fatalf("first stream: %v", err)
	}
	if _, err := openWatch(ctx, conn); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second stream while the first is open: %v, want ResourceExhausted", err)
	}
	receive(t, c.ended, "denied stream's end")
	if err := invoke(ctx, conn); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a call while the stream is open: %v, want ResourceExhausted", err)
	}
	c.release <- struct{}{}
	if err := a.RecvMsg(new(emptypb.Empty)); err != io.EOF {
		t.Fatalf("first stream after its handler returned: %v, want EOF", err)
	}
	receive(t, c.ended, "first stream's end")

	cctx, ccancel := context.WithCancel(ctx)
	if _, err := openWatch(cctx, conn); err != nil {
		t.Fatalf("a stream once the first ended: %v", err)
	}
	ccancel()
	receive(t, c.ended, "cancelled stream's end")
	d, err := openWatch(ctx, conn)
	if err != nil {
		t.Fatalf("a stream once the client cancelled the one before: %v", err)
	}
	c.release <- struct{}{}
	if err := d.RecvMsg(new(emptypb.Empty)); err != io.EOF {
		t.Errorf("last stream after its handler returned: %v, want EOF", err)
	}
}
