package grpclimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/grpclimit"
	"github.com/faucetgo/faucet/httplimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The methods of the calls service.
const (
	callMethod  = "/test.Calls/Call"
	watchMethod = "/test.Calls/Watch"
)

// calls is a service of one unary method, Call, and one server stream,
// Watch, that do as a call's "do" metadata says: "block" until released
// or the call ends, "error" fail, "panic" panic; otherwise Call returns at
// once. A Watch stream sends one message, then waits until released (it
// then ends) or its client leaves.
type calls struct {
	m *httplimit.Middleware
	// release lets one blocked handler go per value sent.
	release chan struct{}
	// entered has a value per blocked handler that started.
	entered chan struct{}
	// ended has a value per stream once the limiter let it go.
	ended chan struct{}
	// inside is how many Call handlers block now, most the most at once.
	inside, most atomic.Int64

	mu sync.Mutex
	// arrived is when each Call that returns at once reached its handler,
	// by its "n" metadata.
	arrived map[string]time.Time
}

// serveCalls runs the calls service behind a limiter of rules on the real
// clock, with a recovery interceptor outside the limiter's, and returns a
// client connection to it.
func serveCalls(t *testing.T, rules string, opts httplimit.Options) (*grpc.ClientConn, *calls) {
	t.Helper()
	parsed, err := httplimit.ParseRules([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(parsed, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	c := &calls{m: m, release: make(chan struct{}), entered: make(chan struct{}, 64), ended: make(chan struct{}, 64),
		arrived: map[string]time.Time{}}
	l := grpclimit.New(m, grpclimit.Options{})
	g := grpc.NewServer(grpc.ChainUnaryInterceptor(recoverPanics, l.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(c.signalEnd, l.StreamServerInterceptor()))
	g.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Calls",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "Call", Handler: c.callHandler}},
		Streams:     []grpc.StreamDesc{{StreamName: "Watch", ServerStreams: true, Handler: c.watch}},
	}, c)
	return listen(t, g), c
}

func (c *calls) callHandler(_ any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
	in := new(emptypb.Empty)
	if err := dec(in); err != nil {
		return nil, err
	}
	return intercept(ctx, in, &grpc.UnaryServerInfo{FullMethod: callMethod}, c.call)
}

func (c *calls) call(ctx context.Context, _ any) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	switch do(md) {
	case "block":
		n := c.inside.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
		c.entered <- struct{}{}
		defer c.inside.Add(-1)
		select {
		case <-c.release:
		case <-ctx.Done():
		}
	case "error":
		return nil, status.Error(codes.Internal, "the handler failed")
	case "panic":
		panic("the handler panicked")
	default:
		if n := md.Get("n"); len(n) == 1 {
			c.mu.Lock()
			c.arrived[n[0]] = time.Now()
			c.mu.Unlock()
		}
	}
	return &emptypb.Empty{}, nil
}

func (c *calls) watch(_ any, ss grpc.ServerStream) error {
	if err := ss.RecvMsg(new(emptypb.Empty)); err != nil {
		return err
	}
	if err := ss.SendMsg(&emptypb.Empty{}); err != nil {
		return err
	}
	select {
	case <-c.release:
	case <-ss.Context().Done():
	}
	return nil
}

// signalEnd is a stream interceptor outside the limiter's: it tells ended
// once the limiter is done with a stream.
func (c *calls) signalEnd(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	defer func() { c.ended <- struct{}{} }()
	return next(srv, ss)
}

// recoverPanics turns a handler's panic into Internal, as a server's
// recovery interceptor would (grpc-go recovers none).
func recoverPanics(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(codes.Internal, "panic: %v", p)
		}
	}()
	return next(ctx, req)
}

func do(md metadata.MD) string {
	if v := md.Get("do"); len(v) == 1 {
		return v[0]
	}
	return ""
}

// invoke makes a Call with the metadata pairs.
func invoke(ctx context.Context, conn *grpc.ClientConn, pairs ...string) error {
	ctx = metadata.AppendToOutgoingContext(ctx, pairs...)
	return conn.Invoke(ctx, callMethod, &emptypb.Empty{}, new(emptypb.Empty))
}

// openWatch opens a Watch stream and reads its first message.
func openWatch(ctx context.Context, conn *grpc.ClientConn) (grpc.ClientStream, error) {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}, watchMethod)
	if err != nil {
		return nil, err
	}
	if err := s.SendMsg(&emptypb.Empty{}); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	return s, s.RecvMsg(new(emptypb.Empty))
}

// receive waits for a value of ch, failing the test after 10 s.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s after 10 s", what)
		panic("unreachable")
	}
}

// retryDelay is the RetryInfo detail of err's status; 0 without one.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			return r.RetryDelay.AsDuration()
		}
	}
	return 0
}

// checkCall is m.Check on the request a Call from loopback is to the
// rules; it takes what Check takes.
func checkCall(m *httplimit.Middleware) httplimit.Result {
	r := httptest.NewRequest(http.MethodPost, callMethod, nil)
	r.RemoteAddr = "127.0.0.1:1"
	return m.Check(r)
}
