package rls

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/conncap"
	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/grpclimit/envoyrls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

const (
	// rlsMaxMessage bounds a rate-limit request: Envoy's are a few hundred
	// bytes, and gRPC's default of 4 MiB would let each stream hold that
	// much.
	rlsMaxMessage = 64 << 10
	// rlsWindow is the HTTP/2 flow-control window of a stream and of a
	// connection, fixed (gRPC's default grows it up to 16 MiB by
	// bandwidth estimates): what a client may send unread is bounded per
	// connection.
	rlsWindow = 64 << 10
	// rlsBuffer is the read and write buffer of a connection (gRPC's
	// default is 32 KiB each).
	rlsBuffer = 8 << 10
	// rlsPingMinTime is the shortest interval between a client's
	// keepalive pings that the service accepts; a client pinging more
	// often is sent GOAWAY.
	rlsPingMinTime = 10 * time.Second
	// rlsMaxStreamingCalls bounds the streaming calls (health Watch,
	// reflection) in flight over all connections, apart from
	// --rls-max-calls: a stream may last as long as its connection, and
	// Envoy makes none, so a few serve health watchers and grpcurl while
	// lasting ones cannot use up the unary calls' budget.
	rlsMaxStreamingCalls = 100
	// rlsMaxConnectionAge bounds the life of a connection, so that none,
	// and no stream on one, lasts forever; gRPC sends GOAWAY at about
	// that age (±10%), and calls in flight get --read-timeout to finish.
	rlsMaxConnectionAge = time.Hour
)

// errTooManyCalls answers a call beyond --rls-max-calls.
var errTooManyCalls = status.Error(codes.ResourceExhausted, "faucet: too many rate-limit service calls in flight (--rls-max-calls)")

// errTooManyStreams answers a streaming call beyond rlsMaxStreamingCalls.
var errTooManyStreams = status.Error(codes.ResourceExhausted, "faucet: too many streaming calls in flight (at most 100)")

// Service is the running rate-limit service.
type Service struct {
	flags  *settings.RLS
	http   *settings.HTTP
	srv    *envoyrls.Server
	grpc   *grpc.Server
	health *health.Server
	ln     net.Listener
	conns  *conncap.Listener // nil if --max-conns is 0
	log    *slog.Logger
	// unary holds the full names of the unary methods, whose calls are
	// bounded at --read-timeout; set before serving, read-only after.
	unary map[string]bool
	// calls counts the unary calls in flight, streams the streaming ones,
	// refused those refused at --rls-max-calls or rlsMaxStreamingCalls.
	calls, streams, refused atomic.Int64
}

// New builds the rate-limit service on store from a
// configuration already read.
// The listener's bounds come from the HTTP flags of the same meaning (h):
// a connection must complete its HTTP/2 handshake within
// --read-header-timeout, one without a call for --idle-timeout is closed,
// --max-conns caps the connections (see Listen), --max-header-bytes a
// call's metadata, and a unary call ends at --read-timeout, its request
// message included: gRPC itself would wait for a message for as long as
// the connection lives, with a goroutine per silent call.
func New(f *settings.RLS, h *settings.HTTP, rc *Config, store engine.Store, seed uint64, onStoreError func(error), logger *slog.Logger) (*Service, error) {
	srv, err := envoyrls.New(rc.cfg, envoyrls.Options{Store: store, Headers: f.Headers, ShadowHeaders: f.ShadowHeaders, ShadowMode: f.Shadow, Seed: seed,
		OnStoreError: onStoreError})
	if err != nil {
		return nil, err
	}
	r := &Service{flags: f, http: h, srv: srv, log: logger.With("component", "rls"), health: health.NewServer()}
	r.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(rlsMaxMessage),
		grpc.ConnectionTimeout(h.ReadHeaderTimeout),
		grpc.MaxConcurrentStreams(uint32(f.MaxStreams)),
		grpc.InTapHandle(r.tap), grpc.UnaryInterceptor(unaryEnded), grpc.StreamInterceptor(streamEnded),
		grpc.MaxHeaderListSize(uint32(h.MaxHeaderBytes)),
		grpc.InitialWindowSize(rlsWindow), grpc.InitialConnWindowSize(rlsWindow),
		grpc.ReadBufferSize(rlsBuffer), grpc.WriteBufferSize(rlsBuffer),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: rlsPingMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: h.IdleTimeout, Time: h.IdleTimeout, Timeout: h.ReadHeaderTimeout,
			MaxConnectionAge: rlsMaxConnectionAge, MaxConnectionAgeGrace: h.ReadTimeout}))
	srv.Register(r.grpc)
	healthpb.RegisterHealthServer(r.grpc, r.health)
	reflection.Register(r.grpc)
	r.unary = make(map[string]bool)
	for svc, info := range r.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			if !m.IsClientStream && !m.IsServerStream {
				r.unary["/"+svc+"/"+m.Name] = true
			}
		}
	}
	r.logLoaded(rc)
	return r, nil
}

func (r *Service) logLoaded(rc *Config) {
	for _, w := range rc.warnings {
		r.log.Warn("rate-limit configuration: key ignored", "where", w)
	}
	if rc.files == 0 {
		r.log.Warn("no *.yaml files in --rls-config: every request is answered OK", "dir", r.flags.Config)
	}
}

// Listen opens the listener, capped at --max-conns: a connection is busy
// while it has a call in flight (see tap).
func (r *Service) Listen() error {
	ln, err := net.Listen("tcp", r.flags.Listen)
	if err != nil {
		return fmt.Errorf("--rls: %w", err)
	}
	r.ln = ln
	if r.http.MaxConns > 0 {
		if r.conns, err = conncap.New(ln, conncap.Config{Max: r.http.MaxConns, Wait: r.http.ReadHeaderTimeout, Calls: true}); err != nil {
			ln.Close()
			return fmt.Errorf("--rls: %w", err)
		}
		r.ln = r.conns
	}
	return nil
}

// tap sees every call before gRPC starts a goroutine for it: it refuses
// a unary one beyond --rls-max-calls and a stream beyond
// rlsMaxStreamingCalls, bounds a unary one at --read-timeout and a
// stream's wait for its first message likewise, and keeps its connection
// busy for the connection cap while the call waits for its request.
// It runs with the connection's transport locked, so it does little.
func (r *Service) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	unary := r.unary[info.FullMethodName]
	count, limit, refusal := &r.calls, int64(r.flags.MaxCalls), errTooManyCalls
	if !unary {
		count, limit, refusal = &r.streams, rlsMaxStreamingCalls, errTooManyStreams
	}
	if count.Add(1) > limit {
		count.Add(-1)
		r.refused.Add(1)
		return nil, refusal
	}
	c := &rlsCall{r: r, count: count}
	if r.conns != nil {
		if p, ok := peer.FromContext(ctx); ok {
			c.conn.Store(r.conns.Begin(p.Addr))
		}
	}
	var call context.Context
	if unary {
		call, c.cancel = context.WithTimeout(ctx, r.http.ReadTimeout)
	} else {
		// A stream (health Watch, reflection) may last: only its first
		// message is bounded (see firstMessageStream).
		call, c.cancel = context.WithCancel(ctx)
		c.firstMessage = time.AfterFunc(r.http.ReadTimeout, c.cancel)
	}
	// gRPC cancels ctx when the call ends, however it ends; the
	// interceptors see most calls end first, and spare the goroutine
	// AfterFunc starts.
	c.stopAfter = context.AfterFunc(ctx, c.end)
	return context.WithValue(call, rlsCallKey{}, c), nil
}

// Server is the rate-limit service itself, whose counters the metrics
// export.
func (r *Service) Server() *envoyrls.Server { return r.srv }

// Addr is where Listen listens.
func (r *Service) Addr() net.Addr { return r.ln.Addr() }

// Export exports the listener's connections and the calls in flight and
// refused; it is called once, after Listen.
func (r *Service) Export(m *metrics.Metrics) {
	if r.conns != nil {
		m.WatchConns("rls", r.conns)
	}
	m.WatchRLSCalls(&r.calls, &r.refused)
}

// rlsCall is a call in flight, as the tap saw it begin.
type rlsCall struct {
	r     *Service
	count *atomic.Int64 // r.calls or r.streams
	// conn is the connection kept busy for the connection cap, nil once
	// released.
	conn         atomic.Pointer[conncap.Conn]
	cancel       context.CancelFunc // unneeded once the call ends: gRPC cancels its parent
	firstMessage *time.Timer        // ends a stream without a first message; nil for unary calls
	stopAfter    func() bool
}

type rlsCallKey struct{}

// end accounts for the end of the call.
func (c *rlsCall) end() {
	if c.firstMessage != nil {
		c.firstMessage.Stop()
	}
	c.releaseConn()
	c.count.Add(-1)
}

// releaseConn ends the call's hold on its connection, once.
func (c *rlsCall) releaseConn() {
	c.conn.Swap(nil).End()
}

// ended is called by the interceptors once the handler returned: the call
// is over but for writing its answer, which a cancel would lose.
func ended(ctx context.Context) {
	if c, ok := ctx.Value(rlsCallKey{}).(*rlsCall); ok && c.stopAfter() {
		c.end()
	}
}

// unaryEnded is the unary interceptor that accounts for a call's end.
func unaryEnded(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	ended(ctx)
	return resp, err
}

// streamEnded is the stream interceptor that accounts for a stream's end,
// and stops its first-message timer once that message came.
func streamEnded(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	if c, ok := ctx.Value(rlsCallKey{}).(*rlsCall); ok && c.firstMessage != nil {
		ss = &firstMessageStream{ServerStream: ss, call: c}
	}
	err := handler(srv, ss)
	ended(ctx)
	return err
}

// firstMessageStream stops a stream's first-message timer once that
// message came, and no longer keeps its connection busy for the
// connection cap: what follows (a Watch's updates, reflection's answers)
// waits on the server or on a client that has nothing to send, as an idle
// keep-alive connection does, and a connection that may carry a stream for
// an hour must stay evictable, or --max-conns such streams lock clients
// out. Evicting it ends the stream, which the client sees as a closed
// connection and may reopen; a unary call on it keeps it busy still.
// Bounding the stream's life instead would end health watchers every
// bound for no gain, as rlsMaxStreamingCalls bounds what streams hold.
type firstMessageStream struct {
	grpc.ServerStream
	call *rlsCall // nil once the first message came
}

func (s *firstMessageStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && s.call != nil {
		s.call.firstMessage.Stop()
		s.call.releaseConn()
		s.call = nil
	}
	return err
}

// Serve serves on the listener, sending to served the error it ends with.
func (r *Service) Serve(served chan<- error) {
	r.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	r.health.SetServingStatus("envoy.service.ratelimit.v3.RateLimitService", healthpb.HealthCheckResponse_SERVING)
	go func() { served <- r.grpc.Serve(r.ln) }()
}

// Stop drains the service within ctx, then cuts what is left.
func (r *Service) Stop(ctx context.Context) {
	r.health.Shutdown()
	done := make(chan struct{})
	go func() { r.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		r.grpc.Stop()
	}
	r.srv.Close()
}
