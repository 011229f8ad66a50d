package grpclimit_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/grpclimit"
	"github.com/faucetgo/faucet/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// spellings of /grpc.health.v1.Health/Check that a client can put in :path.
var checkSpellings = []string{"/grpc.health.v1.Health/Check", "//grpc.health.v1.Health/Check", "/./grpc.health.v1.Health/Check",
	"/x/../grpc.health.v1.Health/Check", "/grpc.health.v1.Health//Check", "/grpc.health.v1.Health/./Check",
	"/%67rpc.health.v1.Health/Check", "/grpc.health.v1.Health%2FCheck", "/grpc.health.v1.Health/Check/"}

// pathServer serves the health service behind a limiter whose rule matches
// the path of Check, burst 1, and counts the calls that reach a handler;
// with unknown, calls to unknown methods reach a handler too, as in a
// gRPC proxy.
func pathServer(t *testing.T, unknown bool) (*grpc.ClientConn, *atomic.Int64) {
	t.Helper()
	rules, err := httplimit.ParseRules([]byte(`{"rules":[{"name":"check","limit_keys":["global"],
	  "match":{"path":["/grpc.health.v1.Health/Check"]},"algorithm_config":{"rps":0.001,"burst":1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	m, err := httplimit.New(rules, httplimit.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	l := grpclimit.New(m, grpclimit.Options{})
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		handled.Add(1)
		return h(ctx, req)
	}
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(l.UnaryServerInterceptor(), count), grpc.StreamInterceptor(l.StreamServerInterceptor())}
	if unknown {
		opts = append(opts, grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
			handled.Add(1)
			return nil
		}))
	}
	g := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); g.Stop(); m.Close() })
	return conn, &handled
}

// Another spelling of a method's path never reaches a handler unlimited:
// grpc-go routes by the exact name, so a registered method gets only its
// own spelling; a handler of unknown methods (a gRPC proxy) gets only
// canonical names, as the rules judged them.
func TestNonCanonicalMethodPaths(t *testing.T) {
	for _, unknown := range []bool{false, true} {
		conn, handled := pathServer(t, unknown)
		codesSeen := map[codes.Code]int{}
		for _, m := range checkSpellings {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := conn.Invoke(ctx, m, &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
			cancel()
			codesSeen[status.Code(err)]++
		}
		t.Logf("unknown-service handler %v: %v; %d reached a handler", unknown, codesSeen, handled.Load())
		if handled.Load() != 1 || codesSeen[codes.OK] != 1 || codesSeen[codes.Internal] != 0 {
			t.Errorf("unknown-service handler %v: %d calls reached a handler (codes %v), want 1 of %d", unknown, handled.Load(), codesSeen, len(checkSpellings))
		}
	}
}
