package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/grpclimit"
	"github.com/faucetgo/faucet/httplimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// serve runs a gRPC server with the health service behind the limiter of
// rules, on loopback, and returns a client of it.
func serve(t testing.TB, rules string, opts grpclimit.Options) healthpb.HealthClient {
	t.Helper()
	parsed, err := httplimit.ParseRules([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	m, err := httplimit.New(parsed, httplimit.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	l := grpclimit.New(m, opts)
	g := grpc.NewServer(grpc.UnaryInterceptor(l.UnaryServerInterceptor()), grpc.StreamInterceptor(l.StreamServerInterceptor()))
	healthpb.RegisterHealthServer(g, health.NewServer())
	return healthpb.NewHealthClient(listen(t, g))
}

// listen runs g on loopback until the test ends, and returns a client
// connection to it.
func listen(t testing.TB, g *grpc.Server) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); g.Stop() })
	return conn
}

const perPeer = `{"rules": [{"name": "per-peer", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 1, "burst": 2}}]}`

func Example() {
	rules, err := httplimit.ParseRules([]byte(`{"rules": [
		{"name": "per-peer", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 1, "burst": 2}}]}`))
	if err != nil {
		panic(err)
	}
	m, err := httplimit.New(rules, httplimit.Options{})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	l := grpclimit.New(m, grpclimit.Options{})
	g := grpc.NewServer(grpc.UnaryInterceptor(l.UnaryServerInterceptor()), grpc.StreamInterceptor(l.StreamServerInterceptor()))
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go g.Serve(lis)
	defer g.Stop()

	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 3 {
		var md metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		fmt.Println(status.Code(err), md.Get("ratelimit"))
	}
	// Output:
	// OK ["per-peer";r=1;t=0]
	// OK ["per-peer";r=0;t=1]
	// ResourceExhausted ["per-peer";r=0;t=1]
}

// A denial carries the wait in a RetryInfo detail, never shorter than the
// RateLimit field's t.
func TestUnaryDenialHasRetryInfo(t *testing.T) {
	client := serve(t, perPeer, grpclimit.Options{})
	ctx := context.Background()
	for range 2 {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	var md metadata.MD
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("third call: %v, want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() < time.Second || retry.RetryDelay.AsDuration() > 2*time.Second {
		t.Errorf("RetryInfo %v, want 1 s plus at most half of it", retry)
	}
	if got := md.Get("retry-after"); len(got) != 1 {
		t.Errorf("retry-after metadata %q", got)
	}
	if got := md.Get("ratelimit-policy"); len(got) != 1 || got[0] != `"per-peer";q=2;w=2` {
		t.Errorf("ratelimit-policy metadata %q", got)
	}
}

// A stream is checked once, when it opens.
func TestStreamCheckedWhenItOpens(t *testing.T) {
	client := serve(t, perPeer, grpclimit.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var codesSeen []codes.Code
	for range 3 {
		stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		codesSeen = append(codesSeen, status.Code(err))
	}
	if fmt.Sprint(codesSeen) != "[OK OK ResourceExhausted]" {
		t.Errorf("streams: %v", codesSeen)
	}
}

// The rules see the full method as the path, and Options.Key's value as
// the Faucet-Key header, which a client cannot set itself.
func TestMethodsAndKeys(t *testing.T) {
	client := serve(t, `{"rules": [
		{"name": "watch", "limit_keys": ["path"], "algorithm_config": {"rps": 1, "burst": 1}, "match": {"path": "/grpc.health.v1.Health/Watch"}},
		{"name": "tenant", "limit_keys": ["header:Faucet-Key"], "algorithm_config": {"rps": 1, "burst": 3}}
	]}`, grpclimit.Options{Key: func(ctx context.Context, method string) string {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("x-tenant"); len(v) > 0 {
			return "tenant-" + v[0]
		}
		return ""
	}})
	call := func(pairs ...string) codes.Code {
		ctx := metadata.AppendToOutgoingContext(context.Background(), pairs...)
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		return status.Code(err)
	}
	// Three calls of tenant a, each claiming another Faucet-Key: one bucket.
	for i := range 3 {
		if c := call("x-tenant", "a", "faucet-key", fmt.Sprint(i)); c != codes.OK {
			t.Fatalf("call %d of tenant a: %v", i, c)
		}
	}
	if c := call("x-tenant", "a", "faucet-key", "fresh"); c != codes.ResourceExhausted {
		t.Errorf("a fourth call of tenant a with its own Faucet-Key: %v, want ResourceExhausted", c)
	}
	if c := call("x-tenant", "b"); c != codes.OK {
		t.Errorf("tenant b: %v", c)
	}
	// The watch rule, burst 1, applied to none of the Check calls above.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []codes.Code
	for range 2 {
		stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		seen = append(seen, status.Code(err))
	}
	if fmt.Sprint(seen) != "[OK ResourceExhausted]" {
		t.Errorf("Watch streams under a burst of 1: %v", seen)
	}
}

// down is a store whose every take fails.
type down struct {
	limit engine.Limit
	burst float64
}

func (d down) Take(context.Context, string, float64) (engine.Decision, error) {
	return engine.Decision{}, engine.ErrUnavailable
}
func (d down) TakeAll(context.Context, []engine.Take, []engine.Decision) (int, error) {
	return -1, engine.ErrUnavailable
}
func (d down) Limit() engine.Limit { return d.limit }
func (d down) Burst() float64      { return d.burst }
func (d down) Close() error        { return nil }

// A cost the rules refuse is InvalidArgument; a store failure under
// fail_mode closed is Unavailable, under open the call passes.
func TestRefusalsAndFailures(t *testing.T) {
	client := serve(t, `{"rules": [{"name": "weighted", "limit_keys": ["ip:address"],
		"algorithm_config": {"rps": 10, "burst": 10, "cost_source": "header:x-weight", "max_cost": 5, "cost_out_of_range": "reject"}}]}`, grpclimit.Options{})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-weight", "9")
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("cost 9 above max_cost 5: %v, want InvalidArgument", err)
	}
	for mode, want := range map[string]codes.Code{"closed": codes.Unavailable, "open": codes.OK} {
		rules, _ := httplimit.ParseRules([]byte(`{"rules": [{"name": "r", "limit_keys": ["ip:address"], "fail_mode": "` + mode + `",
			"algorithm_config": {"rps": 1, "burst": 1}}]}`))
		store := engine.NewPool(func(s engine.Spec) (engine.Limiter, error) { return down{s.Limit, s.Burst}, nil })
		m, err := httplimit.New(rules, httplimit.Options{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		l := grpclimit.New(m, grpclimit.Options{})
		_, err = l.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/s/M"},
			func(context.Context, any) (any, error) { return "done", nil })
		if status.Code(err) != want {
			t.Errorf("store down, fail_mode %s: %v, want %v", mode, err, want)
		}
		m.Close()
	}
}

// A client cannot dodge a per-peer limit by forging forwarding metadata:
// without trusted proxies the peer address is the key.
func TestForgedForwardingIgnored(t *testing.T) {
	client := serve(t, perPeer, grpclimit.Options{})
	admitted := 0
	for i := range 10 {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", fmt.Sprintf("203.0.113.%d", i), "forwarded", fmt.Sprintf("for=198.51.100.%d", i))
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
			admitted++
		}
	}
	if admitted != 2 {
		t.Errorf("%d of 10 calls with forged forwarding admitted, want the peer's burst of 2", admitted)
	}
}

// Metadata a rule keys on has one value, as a header has: a call with
// "x-api-key: rnd<i>" and "x-api-key: victim" was keyed on rnd<i> (10 of
// 10 admitted on burst 1) while the service could read victim. It is
// InvalidArgument, and takes nothing.
func TestRepeatedMetadataRefused(t *testing.T) {
	client := serve(t, `{"rules": [{"name": "key", "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 1, "burst": 1}}]}`, grpclimit.Options{})
	for _, pairs := range [][]string{
		{"x-api-key", "rnd", "x-api-key", "victim"},
		{"x-api-key", "rnd, victim"},
		{"x-api-key", "rnd", "x_api_key", "victim"},
	} {
		for i := range 10 {
			p := append([]string(nil), pairs...)
			p[1] += fmt.Sprint(i)
			ctx := metadata.AppendToOutgoingContext(context.Background(), p...)
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "x-api-key") && !strings.Contains(st.Message(), "X-Api-Key") {
				t.Fatalf("%q: %v, want InvalidArgument naming the key", p, err)
			}
		}
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "victim")
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("the victim's first call after the refusals: %v, want OK (nothing taken)", err)
	}
}

// A shadow rule is left out of the RateLimit metadata: it denies nothing.
func TestShadowRulesLeftOutOfMetadata(t *testing.T) {
	client := serve(t, `{"rules": [
		{"name": "trial", "limit_keys": ["ip:address"], "mode": "shadow", "algorithm_config": {"rps": 1, "burst": 1}},
		{"name": "per-method", "limit_keys": ["path"], "algorithm_config": {"rps": 1, "burst": 10}}]}`, grpclimit.Options{})
	for i := range 3 {
		var md metadata.MD
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(md.Get("ratelimit-policy"), md.Get("ratelimit"), md.Get("x-faucet-reason")); got != fmt.Sprintf(`["per-method";q=10;w=10] ["per-method";r=%d;t=0] []`, 9-i) {
			t.Errorf("call %d: metadata %s", i, got)
		}
	}
}
