package envoyrls

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// clock is a virtual clock for the in-memory store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rls is a Server behind a real gRPC listener on loopback, and the
// generated Envoy client talking to it.
type rls struct {
	srv    *Server
	client pb.RateLimitServiceClient
	clock  *clock
}

// startRLS serves the configuration files srcs (one domain each) with opts,
// on a virtual clock unless opts.Now is set.
func startRLS(t *testing.T, opts Options, srcs ...string) *rls {
	t.Helper()
	var domains []*Domain
	for i, src := range srcs {
		d, err := ParseDomain("config"+string(rune('a'+i))+".yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		domains = append(domains, d)
	}
	cfg, err := NewConfig(domains...)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	if opts.Now == nil {
		opts.Now = c.now
	}
	srv, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		srv.Close()
	})
	return &rls{srv: srv, client: pb.NewRateLimitServiceClient(conn), clock: c}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *common.RateLimitDescriptor {
	d := &common.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &common.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (r *rls) ask(t *testing.T, domain string, descs ...*common.RateLimitDescriptor) *pb.RateLimitResponse {
	t.Helper()
	resp, err := r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: domain, Descriptors: descs})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Statuses) != len(descs) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(descs))
	}
	return resp
}

// admits asks n times and returns how many were admitted.
func (r *rls) admits(t *testing.T, n int, domain string, descs ...*common.RateLimitDescriptor) int {
	t.Helper()
	ok := 0
	for range n {
		if r.ask(t, domain, descs...).OverallCode == pb.RateLimitResponse_OK {
			ok++
		}
	}
	return ok
}
