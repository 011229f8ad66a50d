package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/redisstore/redistest"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/faucetgo/faucet/cmd/internal/logtest"
)

var rlsAddr = regexp.MustCompile(`\brls_addr"?[=:]"?([^\s"]+)`)

const rlsEdge = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 3}
`

// startRLSServe runs faucet serve with the rate-limit service on a free
// loopback port over a configuration directory holding files.
func startRLSServe(t *testing.T, files map[string]string, args ...string) (*proc, string, string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := startServe(t, append([]string{"--rls", "127.0.0.1:0", "--rls-config", dir, "--watch", "100ms"}, args...)...)
	addr := submatch(rlsAddr, p.log())
	if addr == "" {
		t.Fatalf("no rls_addr in the log:\n%s", p.log())
	}
	return p, addr, dir
}

func rlsClient(t *testing.T, addr string) (rlspb.RateLimitServiceClient, healthpb.HealthClient) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn), healthpb.NewHealthClient(conn)
}

func edgeRequest(ip string) *rlspb.RateLimitRequest {
	return &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*common.RateLimitDescriptor{{
		Entries: []*common.RateLimitDescriptor_Entry{{Key: "remote_address", Value: ip}},
	}}}
}

// The binary serves the rate-limit service and health to the generated
// clients, and reloads a changed file keeping the buckets of unchanged
// limits.
func TestServeRLSEndToEnd(t *testing.T) {
	p, addr, dir := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge})
	client, hc := rlsClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		h, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q: %v, %v", svc, h, err)
		}
	}
	codes := func(ip string, n int) string {
		var out []string
		for range n {
			resp, err := client.ShouldRateLimit(ctx, edgeRequest(ip))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, resp.OverallCode.String())
		}
		return strings.Join(out, " ")
	}
	if got := codes("10.0.0.1", 4); got != "OK OK OK OVER_LIMIT" {
		t.Fatalf("3 an hour: %s", got)
	}
	// A request far above any Envoy's is refused before it is decoded.
	_, err := client.ShouldRateLimit(ctx, edgeRequest(strings.Repeat("x", 10<<20)))
	if status.Code(err) != grpccodes.ResourceExhausted {
		t.Errorf("a 10 MB request: %v, want ResourceExhausted", err)
	}
	// A second domain arrives, the first is unchanged: its buckets stay.
	if err := os.WriteFile(filepath.Join(dir, "api.yaml"), []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, regexp.MustCompile(`reloaded rate-limit configuration.*files"?[=:]2`))
	if got := codes("10.0.0.1", 1); got != "OVER_LIMIT" {
		t.Errorf("after a reload, 10.0.0.1's bucket was reset: %s", got)
	}
	resp, err := client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{{
		Entries: []*common.RateLimitDescriptor_Entry{{Key: "user", Value: "u"}}}}})
	if err != nil || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1 {
		t.Fatalf("the new domain: %v, %v", resp, err)
	}
	// A broken file is reported, and the configuration in force stays.
	if err := os.WriteFile(filepath.Join(dir, "api.yaml"), []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, regexp.MustCompile(`reload of --rls-config failed.*fortnight`))
	if got := codes("10.0.0.2", 1); got != "OK" {
		t.Errorf("after a failed reload: %s", got)
	}
	// The counters, under envoyproxy/ratelimit's names: 6 hits, 2 over.
	_, body := get(t, p.adminURL("/metrics"))
	for _, want := range []string{
		`ratelimit_service_rate_limit_total_hits{domain="edge",key1="remote_address",key2=""} 6`,
		`ratelimit_service_rate_limit_over_limit{domain="edge",key1="remote_address",key2=""} 2`,
		`ratelimit_service_rate_limit_within_limit{domain="edge",key1="remote_address",key2=""} 4`,
		`ratelimit_service_rate_limit_total_hits{domain="api",key1="user",key2=""} 1`,
		`ratelimit_service_rate_limit_total_hits{domain="http",key1="per-ip",key2=""} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, logtest.Grep(body, "ratelimit_service"))
		}
	}
}

// A bad configuration directory stops the start with every problem named,
// and --validate checks it.
func TestServeRLSBadConfigExit2(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: a\ndescriptors:\n  - {key: k, rate_limit: {unit: fortnight, requests_per_unit: 1}}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("domain: b\nbogus: 1\n"), 0o644)
	out, err := exec.Command(faucetBinary(t), "serve", "--rls", "127.0.0.1:0", "--rls-config", dir).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2:\n%s", err, out)
	}
	for _, want := range []string{`"fortnight" is not one of`, "bogus: unknown key", "a.yaml", "b.yaml"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	os.Remove(filepath.Join(dir, "a.yaml"))
	os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(rlsEdge), 0o644)
	out, err = exec.Command(faucetBinary(t), "serve", "--rls", "127.0.0.1:0", "--rls-config", dir, "--validate").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 rate-limit service domains, valid") {
		t.Errorf("--validate: %v\n%s", err, out)
	}
	out, _ = exec.Command(faucetBinary(t), "serve", "--rls", "127.0.0.1:0").CombinedOutput()
	if !strings.Contains(string(out), "--rls: needs --rls-config DIR") {
		t.Errorf("--rls alone: %s", out)
	}
}

// grpcurl, a client that knows nothing of Envoy's protos but what server
// reflection tells it, gets the same answers.
func TestServeRLSWithGrpcurl(t *testing.T) {
	grpcurl, err := exec.LookPath("grpcurl")
	if err != nil {
		if os.Getenv("FAUCET_REQUIRE_GRPCURL") == "1" {
			t.Fatal("FAUCET_REQUIRE_GRPCURL=1 and grpcurl not found: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4")
		}
		t.Skip("grpcurl not found: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4")
	}
	_, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge}, "--rls-headers")
	req := `{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "192.0.2.1"}]}]}`
	var last map[string]any
	for i := range 4 {
		out, err := exec.Command(grpcurl, "-plaintext", "-d", req, addr, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit").CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl: %v\n%s", err, out)
		}
		last = map[string]any{}
		if err := json.Unmarshal(out, &last); err != nil {
			t.Fatalf("grpcurl output: %v\n%s", err, out)
		}
		want := "OK"
		if i == 3 {
			want = "OVER_LIMIT"
		}
		if last["overallCode"] != want {
			t.Fatalf("request %d: %s, want %s", i+1, out, want)
		}
	}
	headers, _ := json.Marshal(last["responseHeadersToAdd"])
	for _, want := range []string{`"key":"Ratelimit-Policy","value":"\"edge.remote_address\";q=3;w=3600"`, `"key":"Retry-After"`} {
		if !strings.Contains(string(headers), want) {
			t.Errorf("headers %s lack %s", headers, want)
		}
	}
	out, err := exec.Command(grpcurl, "-plaintext", addr, "grpc.health.v1.Health/Check").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SERVING") {
		t.Errorf("health through grpcurl: %v\n%s", err, out)
	}
}

// Two instances on one Redis share every rate-limit service limit, per
// check and leased: together they admit one burst.
func TestServeRLSSharedThroughRedis(t *testing.T) {
	redis := startRedisServer(t)
	for _, mode := range [][]string{nil, {"--lease"}} {
		t.Run(fmt.Sprintf("flags=%v", mode), func(t *testing.T) {
			prefix := fmt.Sprintf("rls-%d:", len(mode))
			args := append([]string{"--redis", redis, "--redis-prefix", prefix}, mode...)
			_, a, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge}, args...)
			_, b, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge}, args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			admitted := 0
			for i := range 8 {
				client, _ := rlsClient(t, []string{a, b}[i%2])
				resp, err := client.ShouldRateLimit(ctx, edgeRequest("198.51.100.7"))
				if err != nil {
					t.Fatal(err)
				}
				if resp.OverallCode == rlspb.RateLimitResponse_OK {
					admitted++
				}
			}
			if admitted != 3 {
				t.Errorf("two instances admitted %d, want one burst of 3", admitted)
			}
		})
	}
}

// With --listen "" the rate-limit service runs alone; without --rls an
// empty --listen is refused.
func TestServeRLSAlone(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(rlsEdge), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "--listen", "", "--rls", "127.0.0.1:0", "--rls-config", dir)
	if p.addr != "" {
		t.Errorf("an HTTP listener at %q with --listen \"\"", p.addr)
	}
	client, _ := rlsClient(t, submatch(rlsAddr, p.log()))
	resp, err := client.ShouldRateLimit(context.Background(), edgeRequest("203.0.113.1"))
	if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
		t.Fatalf("%v, %v", resp, err)
	}
	// Nothing of HTTP is loaded or announced: no built-in rule, no mode.
	if log := p.log(); strings.Contains(log, "check API") || strings.Contains(log, "rules=") || strings.Contains(log, "built-in") {
		t.Errorf("the rate-limit service alone announces HTTP rules:\n%s", log)
	}
	if _, body := get(t, p.adminURL("/metrics")); strings.Contains(body, "faucet_decisions_total") {
		t.Errorf("metrics count decisions of an HTTP rule that is not served:\n%s", logtest.Grep(body, "faucet_decisions_total"))
	}
	out, _ := exec.Command(faucetBinary(t), "serve", "--listen", "").CombinedOutput()
	if !strings.Contains(string(out), "--listen: may be empty only with --rls") {
		t.Errorf("--listen \"\" alone: %s", out)
	}
	out, _ = exec.Command(faucetBinary(t), "serve", "--listen", "", "--rls", "127.0.0.1:0", "--rls-config", dir, "--rules", filepath.Join(dir, "edge.yaml")).CombinedOutput()
	if !strings.Contains(string(out), `--rules: needs the HTTP listener, which --listen "" turns off`) {
		t.Errorf("--rules with --listen \"\": %s", out)
	}
}

// A client that connects and says nothing is cut off after
// --read-header-timeout, instead of holding a descriptor for as long as it
// likes (gRPC's own default is two minutes).
func TestServeRLSClosesSilentConnections(t *testing.T) {
	_, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge}, "--read-header-timeout", "500ms")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("the silent connection was not closed within 10 s: %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("closed after %v, want about 500ms", waited)
	}
}

// A Redis that stalls (CLIENT PAUSE) makes the rate-limit service answer
// from the in-memory fallback within --redis-timeout, rather than
// Unavailable (which Envoy's default failure_mode_deny false turns into an
// admission) or holding every call for as long as Redis stalls: the one
// instance keeps the whole limit, 3 an hour, so the fourth call is
// OVER_LIMIT.
func TestServeRLSStalledRedis(t *testing.T) {
	redis := startRedisServer(t)
	cli := redistest.Binary(t, "redis-cli")
	_, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge}, "--redis", redis, "--redis-timeout", "200ms")
	client, _ := rlsClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.ShouldRateLimit(ctx, edgeRequest("192.0.2.50")); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(redis)
	if out, err := exec.Command(cli, "-h", host, "-p", port, "CLIENT", "PAUSE", "5000", "ALL").CombinedOutput(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v %s", err, out)
	}
	start := time.Now()
	var got []string
	for range 4 {
		resp, err := client.ShouldRateLimit(ctx, edgeRequest("192.0.2.51"))
		if err != nil {
			t.Fatalf("with Redis stalled: %v, want an answer from the fallback", err)
		}
		got = append(got, resp.OverallCode.String())
	}
	if fmt.Sprint(got) != "[OK OK OK OVER_LIMIT]" {
		t.Errorf("with Redis stalled: %v, want the fallback's limit of 3: [OK OK OK OVER_LIMIT]", got)
	}
	if waited := time.Since(start); waited > 4*time.Second {
		t.Errorf("4 calls answered after %v with --redis-timeout 200ms", waited)
	}
}

// A calendar quota in the rate-limit service's configuration is shared
// through Redis by two instances: 3 a day between them, and the denial's
// duration_until_reset is the time to Kiritimati's midnight (10:00 UTC).
func TestServeRLSCalendarQuotaThroughRedis(t *testing.T) {
	const conf = `domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: day
      requests_per_unit: 3
      calendar: {time_zone: Pacific/Kiritimati}
`
	redis := startRedisServer(t)
	args := []string{"--redis", redis, "--redis-prefix", "rls-quota:", "--redis-timeout", "10s"}
	_, a, _ := startRLSServe(t, map[string]string{"edge.yaml": conf}, args...)
	_, b, _ := startRLSServe(t, map[string]string{"edge.yaml": conf}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admitted := 0
	var last *rlspb.RateLimitResponse
	for i := range 6 {
		client, _ := rlsClient(t, []string{a, b}[i%2])
		resp, err := client.ShouldRateLimit(ctx, edgeRequest("198.51.100.9"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode == rlspb.RateLimitResponse_OK {
			admitted++
		}
		last = resp
	}
	if admitted != 3 {
		t.Errorf("two instances admitted %d of 6, want the day's quota, 3", admitted)
	}
	now := time.Now().UTC()
	renewal := time.Date(now.Year(), now.Month(), now.Day(), 10, 0, 0, 0, time.UTC)
	if !now.Before(renewal) {
		renewal = renewal.Add(24 * time.Hour)
	}
	st := last.Statuses[0]
	got := st.DurationUntilReset.AsDuration()
	if st.Code != rlspb.RateLimitResponse_OVER_LIMIT || got < renewal.Sub(now)-5*time.Second || got > renewal.Sub(now)+time.Second {
		t.Errorf("last status %v, duration_until_reset %v; want OVER_LIMIT until the renewal in %v", st.Code, got, renewal.Sub(now))
	}
}
