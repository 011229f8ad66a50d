package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// KeyHeader is the header under which Options.Key's value reaches the
// rules ("limit_keys": ["header:Faucet-Key"]). Metadata a client sends
// under this name is dropped first, so a client cannot choose its key.
const KeyHeader = "Faucet-Key"

// Options configures a Limiter.
type Options struct {
	// Key, if set, derives a key from the call (an authenticated
	// principal, a tenant): its value is the KeyHeader header of the
	// request the rules see; "" sets none.
	Key func(ctx context.Context, fullMethod string) string
}

// Limiter applies an httplimit.Middleware's rules to gRPC calls. Each call
// is seen by the rules as an HTTP/2 POST to its full method name
// ("/package.Service/Method"), with the call's metadata as headers, the
// peer's address as the client (forwarding headers believed only from the
// Middleware's TrustedProxies) and the :authority as host. So the rules'
// keys (ip:, header:, jwt: on the authorization metadata), matches on
// path, tiers, costs and shadow mode work on calls as on requests. A call
// whose method name is not /service/method in canonical spelling
// (httplimit.CanonicalPath) is refused with InvalidArgument: grpc-go itself
// routes such a name to no registered method, but would hand it as written
// to a handler of unknown services.
//
// Under an in-flight limit ("algorithm": "concurrency") a call holds its
// slot from its admission until its handler returns: a unary call while
// its handler runs (or until it panics, so that a recovery interceptor
// outside this one leaves no slot held), a stream for its whole life. A
// long-lived stream is one call in flight until it ends, so the limit
// bounds open streams, not messages; a client that cancels its stream
// frees the slot once the handler sees the context end and returns. A
// call the limit denies is ResourceExhausted, its RetryInfo an estimate
// from how long calls have lately held their slots.
//
// Under a rule in delay mode a call over the rate waits its turn before
// its handler runs, and its wait counts against its deadline. A call whose
// context ends while it waits gives its tokens back and fails with
// Canceled, or DeadlineExceeded if its deadline passed; one that would
// wait while httplimit.Options.MaxWaiting calls wait already is
// ResourceExhausted. Both shapes need the Middleware's in-memory store.
type Limiter struct {
	m    *httplimit.Middleware
	opts Options
}

// New returns a Limiter over m's rules; m stays the caller's to reload and
// close.
func New(m *httplimit.Middleware, opts Options) *Limiter {
	return &Limiter{m: m, opts: opts}
}

// UnaryServerInterceptor admits every unary call before its handler runs,
// and holds its in-flight slots until the handler returns or panics.
func (l *Limiter) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		done, err := l.admit(ctx, info.FullMethod, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
		// Deferred: a recovery interceptor outside this one may keep the
		// server alive through a handler's panic, and the slots must not
		// outlive the call.
		defer done()
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor admits every stream once, when it opens, and
// holds its in-flight slots until the handler returns: for the stream's
// whole life.
func (l *Limiter) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		done, err := l.admit(ss.Context(), info.FullMethod, ss.SetHeader)
		defer done()
		if err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// admit decides a call, waits its turn under a rule in delay mode, sets
// the RateLimit fields as header metadata, and returns the function that
// gives back its in-flight slots (never nil) and the status of a refusal:
// ResourceExhausted with a RetryInfo detail for a denial (a rate, an
// in-flight limit, or a full delay queue), InvalidArgument for a cost the
// rules refuse, Canceled or DeadlineExceeded for a call whose context
// ended while it waited, Unavailable when the store failed under fail_mode
// closed.
func (l *Limiter) admit(ctx context.Context, fullMethod string, setHeader func(metadata.MD) error) (done func(), err error) {
	if !canonicalMethod(fullMethod) {
		// grpc-go routes a registered method by its exact name; a handler
		// of unknown methods (a proxy) gets the name as the client wrote
		// it, which must then be the one the rules judged.
		return nothing, status.Errorf(codes.InvalidArgument, "method name %q is not of the form /service/method in canonical spelling", fullMethod)
	}
	res, done := l.m.Admit(l.request(ctx, fullMethod))
	return done, refusal(ctx, &res, setHeader)
}

// nothing is the done of a call refused before the rules saw it.
func nothing() {}

// refusal sets res's RateLimit fields as header metadata and returns the
// status of the call, nil if res admitted it.
func refusal(ctx context.Context, res *httplimit.Result, setHeader func(metadata.MD) error) error {
	h := http.Header{}
	res.WriteHeaders(h)
	if len(h) > 0 {
		md := metadata.MD{}
		for k, vs := range h {
			md[strings.ToLower(k)] = vs
		}
		setHeader(md)
	}
	if res.Allowed {
		return nil
	}
	switch {
	case res.Status == http.StatusTooManyRequests:
		st := status.New(codes.ResourceExhausted, fmt.Sprintf("rate limited by %s (%s)", res.DeniedBy, res.Reason))
		if res.RetryAfter > 0 {
			if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(res.RetryAfter) * time.Second)}); err == nil {
				st = d
			}
		}
		return st.Err()
	case res.Status == http.StatusBadRequest:
		return status.Errorf(codes.InvalidArgument, "rate limit rule %s: %s", res.DeniedBy, res.Detail)
	case res.Reason == httplimit.ReasonCancelled:
		// The client left, or its deadline passed, while the call waited
		// its turn: the call's own status, not the store's.
		code := codes.Canceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = codes.DeadlineExceeded
		}
		return status.Error(code, "call ended while it waited its turn under a rule in delay mode")
	default:
		return status.Errorf(codes.Unavailable, "rate limit store unavailable (%s)", res.Reason)
	}
}

// canonicalMethod reports whether fullMethod is /service/method, two
// non-empty segments, spelt as httplimit.CanonicalPath spells it with no
// option.
func canonicalMethod(fullMethod string) bool {
	c, err := httplimit.CanonicalPath(fullMethod, httplimit.PathOptions{})
	return err == nil && c == fullMethod && strings.Count(c, "/") == 2 && !strings.HasSuffix(c, "/")
}

// request is the HTTP request the rules see for a call.
func (l *Limiter) request(ctx context.Context, fullMethod string) *http.Request {
	md, _ := metadata.FromIncomingContext(ctx)
	h := make(http.Header, len(md)+1)
	host := ""
	for k, vs := range md {
		switch {
		case k == ":authority":
			if len(vs) > 0 {
				host = vs[0]
			}
		case strings.HasPrefix(k, ":"):
		default:
			h[textproto.CanonicalMIMEHeaderKey(k)] = vs
		}
	}
	delete(h, KeyHeader)
	if l.opts.Key != nil {
		if k := l.opts.Key(ctx, fullMethod); k != "" {
			h[KeyHeader] = []string{k}
		}
	}
	remote := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	// grpc-go decodes no escape of :path: fullMethod is the raw path.
	path, _ := url.PathUnescape(fullMethod)
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: path, RawPath: fullMethod}, RequestURI: fullMethod,
		Proto: "HTTP/2.0", ProtoMajor: 2, Header: h, Host: host, RemoteAddr: remote,
	}
	return r.WithContext(ctx)
}
