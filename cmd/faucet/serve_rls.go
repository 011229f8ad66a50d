package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/conncap"
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

// rlsFlags are serve's flags for Envoy's rate-limit service.
type rlsFlags struct {
	listen     string
	config     string
	headers    bool
	shadowHdrs bool
	shadow     bool
	maxStreams int
	maxCalls   int
}

const (
	defaultRLSMaxStreams = 100
	defaultRLSMaxCalls   = 10_000
	maxRLSStreams        = 10_000
	maxRLSCalls          = 1_000_000
)

func (f *rlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "rls", "", "also serve Envoy's rate-limit service (gRPC envoy.service.ratelimit.v3, with the standard health service) on `ADDR`ess")
	fs.StringVar(&f.config, "rls-config", "", "`DIR` of the rate-limit service's configuration: every *.yaml file in it, one domain each, in envoyproxy/ratelimit's format")
	fs.BoolVar(&f.headers, "rls-headers", false, "add the RateLimit-Policy and RateLimit fields (and Retry-After on a denial) to the rate-limit service's answers, for Envoy to send on")
	fs.BoolVar(&f.shadowHdrs, "rls-shadow-headers", false, "with --rls-headers, list shadow_mode descriptors in those fields too (by default they report in the metrics only)")
	fs.BoolVar(&f.shadow, "rls-shadow", false, "answer OK to every rate-limit service request, still counting what would have been denied")
	fs.IntVar(&f.maxStreams, "rls-max-streams", defaultRLSMaxStreams, "most calls in flight on one rate-limit service connection (HTTP/2 streams; 1 to 10000): more are refused (REFUSED_STREAM)")
	fs.IntVar(&f.maxCalls, "rls-max-calls", defaultRLSMaxCalls, "most rate-limit service calls in flight over all connections (1 to 1000000): more are answered RESOURCE_EXHAUSTED")
}

func (f *rlsFlags) problems() []string {
	var problems []string
	if f.maxStreams < 1 || f.maxStreams > maxRLSStreams {
		problems = append(problems, fmt.Sprintf("--rls-max-streams: must be from 1 to %d, got %d", maxRLSStreams, f.maxStreams))
	}
	if f.maxCalls < 1 || f.maxCalls > maxRLSCalls {
		problems = append(problems, fmt.Sprintf("--rls-max-calls: must be from 1 to %d, got %d", maxRLSCalls, f.maxCalls))
	}
	switch {
	case f.listen != "" && f.config == "":
		problems = append(problems, "--rls: needs --rls-config DIR")
	case f.listen == "" && (f.config != "" || f.headers || f.shadow || f.maxStreams != defaultRLSMaxStreams || f.maxCalls != defaultRLSMaxCalls):
		problems = append(problems, "--rls-config, --rls-headers, --rls-shadow, --rls-max-streams, --rls-max-calls: only mean something with --rls")
	}
	if f.shadowHdrs && !f.headers {
		problems = append(problems, "--rls-shadow-headers: only means something with --rls-headers")
	}
	return problems
}

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

// rlsConfig is the rate-limit service's configuration as read from its
// directory, with the digest of what was read.
type rlsConfig struct {
	cfg      *envoyrls.Config
	sum      [32]byte
	files    int
	warnings []string
}

// rlsFiles is what a configuration directory holds: its *.yaml files in
// name order, and a digest of their names and contents.
type rlsFiles struct {
	names []string
	data  [][]byte
	sum   [32]byte
}

// readRLSDir reads every *.yaml file of dir, reporting every file it could
// not read.
func readRLSDir(dir string) (*rlsFiles, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	h := sha256.New()
	f := &rlsFiles{names: names}
	var errs []error
	for _, name := range names {
		data, err := readBounded(name, envoyrls.MaxConfigBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(h, "%d:%s%d:", len(name), name, len(data))
		h.Write(data)
		f.data = append(f.data, data)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	copy(f.sum[:], h.Sum(nil))
	return f, nil
}

// parse parses the files, reporting every problem of every file.
func (f *rlsFiles) parse() (*rlsConfig, error) {
	out := &rlsConfig{files: len(f.names), sum: f.sum}
	var domains []*envoyrls.Domain
	var errs []error
	for i, name := range f.names {
		d, err := envoyrls.ParseDomain(name, f.data[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range d.Warnings {
			out.warnings = append(out.warnings, name+": "+w)
		}
		domains = append(domains, d)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var err error
	if out.cfg, err = envoyrls.NewConfig(domains...); err != nil {
		return nil, err
	}
	return out, nil
}

// loadRLSConfig reads and parses the configuration directory dir.
func loadRLSConfig(dir string) (*rlsConfig, error) {
	f, err := readRLSDir(dir)
	if err != nil {
		return nil, err
	}
	return f.parse()
}

// readBounded reads a file of at most limit bytes; a larger one is an
// error, not read whole.
func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, nil
}

// rlsService is the running rate-limit service.
type rlsService struct {
	flags  *rlsFlags
	http   *httpFlags
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
	// sum is the digest of the files last read, readErr the last error
	// reading them: a change is parsed, and an error reported, once. Used
	// by reload only.
	sum     [32]byte
	readErr string
}

// newRLSService builds the rate-limit service on store from a
// configuration already read.
// The listener's bounds come from the HTTP flags of the same meaning (h):
// a connection must complete its HTTP/2 handshake within
// --read-header-timeout, one without a call for --idle-timeout is closed,
// --max-conns caps the connections (see listen), --max-header-bytes a
// call's metadata, and a unary call ends at --read-timeout, its request
// message included: gRPC itself would wait for a message for as long as
// the connection lives, with a goroutine per silent call.
func newRLSService(f *rlsFlags, h *httpFlags, rc *rlsConfig, store engine.Store, seed uint64, onStoreError func(error), logger *slog.Logger) (*rlsService, error) {
	srv, err := envoyrls.New(rc.cfg, envoyrls.Options{Store: store, Headers: f.headers, ShadowHeaders: f.shadowHdrs, ShadowMode: f.shadow, Seed: seed,
		OnStoreError: onStoreError})
	if err != nil {
		return nil, err
	}
	r := &rlsService{flags: f, http: h, srv: srv, log: logger.With("component", "rls"), sum: rc.sum, health: health.NewServer()}
	r.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(rlsMaxMessage),
		grpc.ConnectionTimeout(h.readHeaderTimeout),
		grpc.MaxConcurrentStreams(uint32(f.maxStreams)),
		grpc.InTapHandle(r.tap), grpc.UnaryInterceptor(unaryEnded), grpc.StreamInterceptor(streamEnded),
		grpc.MaxHeaderListSize(uint32(h.maxHeaderBytes)),
		grpc.InitialWindowSize(rlsWindow), grpc.InitialConnWindowSize(rlsWindow),
		grpc.ReadBufferSize(rlsBuffer), grpc.WriteBufferSize(rlsBuffer),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: rlsPingMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: h.idleTimeout, Time: h.idleTimeout, Timeout: h.readHeaderTimeout,
			MaxConnectionAge: rlsMaxConnectionAge, MaxConnectionAgeGrace: h.readTimeout}))
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

func (r *rlsService) logLoaded(rc *rlsConfig) {
	for _, w := range rc.warnings {
		r.log.Warn("rate-limit configuration: key ignored", "where", w)
	}
	if rc.files == 0 {
		r.log.Warn("no *.yaml files in --rls-config: every request is answered OK", "dir", r.flags.config)
	}
}

// listen opens the listener, capped at --max-conns: a connection is busy
// while it has a call in flight (see tap).
func (r *rlsService) listen() error {
	ln, err := net.Listen("tcp", r.flags.listen)
	if err != nil {
		return fmt.Errorf("--rls: %w", err)
	}
	r.ln = ln
	if r.http.maxConns > 0 {
		if r.conns, err = conncap.New(ln, conncap.Config{Max: r.http.maxConns, Wait: r.http.readHeaderTimeout, Calls: true}); err != nil {
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
func (r *rlsService) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	unary := r.unary[info.FullMethodName]
	count, limit, refusal := &r.calls, int64(r.flags.maxCalls), errTooManyCalls
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
		call, c.cancel = context.WithTimeout(ctx, r.http.readTimeout)
	} else {
		// A stream (health Watch, reflection) may last: only its first
		// message is bounded (see firstMessageStream).
		call, c.cancel = context.WithCancel(ctx)
		c.firstMessage = time.AfterFunc(r.http.readTimeout, c.cancel)
	}
	// gRPC cancels ctx when the call ends, however it ends; the
	// interceptors see most calls end first, and spare the goroutine
	// AfterFunc starts.
	c.stopAfter = context.AfterFunc(ctx, c.end)
	return context.WithValue(call, rlsCallKey{}, c), nil
}

// rlsCall is a call in flight, as the tap saw it begin.
type rlsCall struct {
	r     *rlsService
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

func (r *rlsService) serve(served chan<- error) {
	r.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	r.health.SetServingStatus("envoy.service.ratelimit.v3.RateLimitService", healthpb.HealthCheckResponse_SERVING)
	go func() { served <- r.grpc.Serve(r.ln) }()
}

// reload re-reads the configuration directory: on SIGHUP always, on a tick
// only if a file changed. A bad configuration is reported with every
// problem, once, and the one in force stays.
func (r *rlsService) reload(forced bool) {
	f, err := readRLSDir(r.flags.config)
	if err != nil {
		// A file being replaced may be missing for a moment, and a missing
		// one stays missing: report each new error once, not every tick.
		if forced || err.Error() != r.readErr {
			r.readErr = err.Error()
			r.log.Error("reload of --rls-config failed, keeping the configuration in force", "dir", r.flags.config, "err", err)
		}
		return
	}
	r.readErr = ""
	if !forced && f.sum == r.sum {
		return
	}
	r.sum = f.sum
	rc, err := f.parse()
	if err == nil {
		err = r.srv.Load(rc.cfg)
	}
	if err != nil {
		r.log.Error("reload of --rls-config failed, keeping the configuration in force", "dir", r.flags.config, "err", err)
		return
	}
	r.logLoaded(rc)
	r.log.Info("reloaded rate-limit configuration", "dir", r.flags.config, "files", rc.files)
}

// stop drains the service within ctx, then cuts what is left.
func (r *rlsService) stop(ctx context.Context) {
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
