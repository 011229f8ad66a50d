package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/grpclimit/envoyrls"
	"github.com/faucetgo/faucet/redisstore"
	"github.com/faucetgo/faucet/redisstore/redistest"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// rlsConfig is the configuration every rate-limit service of BenchmarkRLS
// serves: a limit per client address that never binds, so every request
// is admitted and none is cheap by denying.
const rlsConfig = `domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000000}
`

// rlsStreams are the concurrent calls of BenchmarkRLS, on one connection
// (HTTP/2 streams), as Envoy makes them.
var rlsStreams = []int{1, 64}

// BenchmarkRLS measures ShouldRateLimit through a generated Envoy client
// over loopback gRPC, with 1 and 64 calls in flight, 1e4 client addresses:
// faucet's envoyrls with buckets in memory (faucet) and in Redis per check
// (faucet_redis), and envoyproxy/ratelimit with its Redis backend
// (envoy_ratelimit), run as its own process from the module this one
// requires.
func BenchmarkRLS(b *testing.B) {
	keys := keys13(10_000)
	seq := uniformSeq(len(keys))
	for _, im := range []rlsImpl{rlsFaucet, rlsFaucetRedis, rlsReference} {
		for _, streams := range rlsStreams {
			b.Run(fmt.Sprintf("impl=%s/streams=%d", im.name, streams), func(b *testing.B) {
				addr := redisAddr(b)
				if _, err := redistest.Do(addr, "FLUSHALL"); err != nil {
					b.Fatal(err)
				}
				target, stop := im.start(b, addr)
				defer stop()
				conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close()
				client := rlspb.NewRateLimitServiceClient(conn)
				// A service that failed to load the configuration would admit
				// everything without a limit, at no cost: make sure it matched.
				probe, err := client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*common.RateLimitDescriptor{{
					Entries: []*common.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "probe"}},
				}}})
				if err != nil || probe.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1_000_000_000 {
					b.Fatalf("%s does not apply the configured limit: %v, %v", im.name, probe, err)
				}
				check := func(ctx context.Context, key string) (bool, error) {
					resp, err := client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*common.RateLimitDescriptor{{
						Entries: []*common.RateLimitDescriptor_Entry{{Key: "remote_address", Value: key}},
					}}})
					if err != nil {
						return false, err
					}
					return resp.OverallCode == rlspb.RateLimitResponse_OK, nil
				}
				runRedis(b, addr, check, streams, keys, seq)
			})
		}
	}
}

// rlsImpl is a rate-limit service: start serves rlsConfig with Redis at
// redisAddr and returns its gRPC address.
type rlsImpl struct {
	name  string
	start func(b *testing.B, redisAddr string) (target string, stop func())
}

// serveEnvoyRLS serves an envoyrls.Server on store over loopback gRPC.
func serveEnvoyRLS(b *testing.B, store engine.Store) (string, func()) {
	d, err := envoyrls.ParseDomain("bench.yaml", []byte(rlsConfig))
	if err != nil {
		b.Fatal(err)
	}
	cfg, _ := envoyrls.NewConfig(d)
	srv, err := envoyrls.New(cfg, envoyrls.Options{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	go g.Serve(lis)
	return lis.Addr().String(), func() { g.Stop(); srv.Close() }
}

var rlsFaucet = rlsImpl{name: "faucet", start: func(b *testing.B, _ string) (string, func()) {
	return serveEnvoyRLS(b, nil)
}}

var rlsFaucetRedis = rlsImpl{name: "faucet_redis", start: func(b *testing.B, redisAddr string) (string, func()) {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	store, err := redisstore.NewStore(client, redisstore.StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	target, stop := serveEnvoyRLS(b, store)
	return target, func() { stop(); store.Close(); client.Close() }
}}

// The reference server's binary, built once from the module bench
// requires.
var (
	referenceOnce sync.Once
	referenceBin  string
	referenceErr  error
)

var rlsReference = rlsImpl{name: "envoy_ratelimit", start: func(b *testing.B, redisAddr string) (string, func()) {
	referenceOnce.Do(func() {
		dir, err := os.MkdirTemp("", "envoy-ratelimit")
		if err != nil {
			referenceErr = err
			return
		}
		referenceBin = filepath.Join(dir, "ratelimit")
		out, err := exec.Command("go", "build", "-o", referenceBin, "github.com/envoyproxy/ratelimit/src/service_cmd").CombinedOutput()
		if err != nil {
			referenceErr = fmt.Errorf("building envoyproxy/ratelimit: %v\n%s", err, out)
		}
	})
	if referenceErr != nil {
		b.Fatal(referenceErr)
	}
	root := b.TempDir()
	confDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "bench.yaml"), []byte(rlsConfig), 0o644); err != nil {
		b.Fatal(err)
	}
	ports := freePorts(b, 3)
	cmd := exec.Command(referenceBin)
	cmd.Env = append(os.Environ(),
		"HOST=127.0.0.1", "PORT="+ports[0], "DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+ports[1],
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+ports[2],
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"USE_STATSD=false", "LOG_LEVEL=error", "BACKEND_TYPE=redis",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	target := "127.0.0.1:" + ports[2]
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	// Ready when it answers on its gRPC port.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", target, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			b.Fatalf("envoyproxy/ratelimit did not listen on %s in 30 s", target)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return target, stop
}}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(b *testing.B, n int) []string {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		out = append(out, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return out
}
