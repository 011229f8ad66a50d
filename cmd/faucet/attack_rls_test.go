package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/faucetgo/faucet/cmd/internal/logtest"
)

// rlsHourly limits each client to 5 requests an hour.
const rlsHourly = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 5}
`

// A descriptor whose hits_addend is 0 looks without taking; at a drained
// bucket it must still be told OVER_LIMIT, or every request carrying it
// passes.
func TestAttackRLSZeroHits(t *testing.T) {
	_, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsHourly})
	client, _ := rlsClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 5 {
		if resp, err := client.ShouldRateLimit(ctx, edgeRequest("198.51.100.7")); err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
			t.Fatalf("draining the bucket: %v, %v", resp, err)
		}
	}
	req := edgeRequest("198.51.100.7")
	req.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	passed := 0
	for range 10 {
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode == rlspb.RateLimitResponse_OK {
			passed++
		}
	}
	if passed != 0 {
		t.Errorf("%d of 10 zero-hit requests passed a drained 5/hour bucket, want 0", passed)
	}
	// Nor can a huge hits_addend wrap anything: it is simply over.
	req.Descriptors[0].HitsAddend = wrapperspb.UInt64(1 << 63)
	resp, err := client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*common.RateLimitDescriptor{req.Descriptors[0]}})
	if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("hits_addend 2^63: %v, %v, want OVER_LIMIT", resp, err)
	}
}

// Metric keys name request values with detailed_metric: an address keeps
// its dots inside one level, and values of 4 KB cannot make the key table
// or a scrape of it large.
func TestAttackRLSMetricValues(t *testing.T) {
	p, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": `
domain: edge
descriptors:
  - key: remote_address
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 5}
`})
	client, _ := rlsClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := client.ShouldRateLimit(ctx, edgeRequest("203.0.113.9")); err != nil {
		t.Fatal(err)
	}
	want := `ratelimit_service_rate_limit_total_hits{domain="edge",key1="remote_address_203.0.113.9",key2=""} 1`
	if _, body := get(t, p.adminURL("/metrics")); !strings.Contains(body, want) {
		t.Errorf("metrics lack %s:\n%s", want, logtest.Grep(body, "total_hits"))
	}
	heap := metric(t, p, "go_memstats_heap_inuse_bytes")
	for i := range 500 {
		if _, err := client.ShouldRateLimit(ctx, edgeRequest(fmt.Sprintf("%04d", i)+strings.Repeat("v", 4000))); err != nil {
			t.Fatal(err)
		}
	}
	grown := metric(t, p, "go_memstats_heap_inuse_bytes") - heap
	_, body := get(t, p.adminURL("/metrics"))
	t.Logf("500 values of 4 KB: heap in use grew %.1f MB; a scrape is %d bytes", grown/1e6, len(body))
	if grown > 16e6 {
		t.Errorf("500 values of 4 KB grew the heap in use by %.1f MB, want under 16", grown/1e6)
	}
	if len(body) > 1<<20 {
		t.Errorf("after 500 values of 4 KB, a scrape is %d bytes, want under 1 MiB", len(body))
	}
	if n := strings.Count(body, `ratelimit_service_rate_limit_total_hits{domain="edge",key1="remote_address_sha256-`); n != 500 {
		t.Errorf("%d metric keys name a digest, want 500", n)
	}
}

// One caller sending 70 distinct request-carried limits cannot take every
// override slot: its domain has its share, the rest are OVER_LIMIT (not
// an error, on which Envoy lets requests through), and another domain's
// new override still binds.
func TestAttackRLSOverrideFlood(t *testing.T) {
	p, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsHourly,
		"api.yaml": "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 10}\n"})
	client, _ := rlsClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	withLimit := func(domain string, n uint32) *rlspb.RateLimitRequest {
		req := edgeRequest("198.51.100.7")
		req.Domain = domain
		req.Descriptors[0].Limit = &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit_HOUR}
		return req
	}
	var errs, okays, overs int
	var firstErr error
	for i := range 70 {
		resp, err := client.ShouldRateLimit(ctx, withLimit("edge", uint32(100+i)))
		switch {
		case err != nil:
			errs++
			if firstErr == nil {
				firstErr = err
			}
		case resp.OverallCode == rlspb.RateLimitResponse_OK:
			okays++
		default:
			overs++
		}
	}
	t.Logf("70 distinct overrides in one domain: %d OK, %d OVER_LIMIT, %d errors (first: %v)", okays, overs, errs, firstErr)
	if errs != 0 || okays != 32 || overs != 38 {
		t.Errorf("70 distinct overrides: %d OK, %d OVER_LIMIT, %d errors; want 32 (edge's half of 64), 38, 0", okays, overs, errs)
	}
	resp, err := client.ShouldRateLimit(ctx, withLimit("api", 7))
	if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
		t.Fatalf("a new override in another domain after the flood: %v, %v; want OK", resp, err)
	}
	for sample, want := range map[string]float64{"faucet_rls_overrides": 33, "faucet_rls_overrides_refused_total": 38, "faucet_rls_overrides_evicted_total": 0} {
		if got := metric(t, p, sample); got != want {
			t.Errorf("%s %v, want %v", sample, got, want)
		}
	}
}

// Envoy fills a descriptor with a header's value as the client sent it and,
// by default, admits a request whose rate-limit call fails, so a value the
// service answered with an error (empty, or over 4 KB) would pass a 5/hour
// limit every time: an empty value is one bucket like any other, and a
// long one is over the limit.
func TestAttackRLSClientValues(t *testing.T) {
	_, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsHourly})
	client, _ := rlsClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, value string
		want        int
	}{{"empty", "", 5}, {"5 KB", strings.Repeat("a", 5000), 0}} {
		admitted, errs := 0, 0
		for range 10 {
			resp, err := client.ShouldRateLimit(ctx, edgeRequest(tc.value))
			switch {
			case err != nil:
				errs++ // Envoy admits the request
				admitted++
			case resp.OverallCode == rlspb.RateLimitResponse_OK:
				admitted++
			}
		}
		t.Logf("%s remote_address, 10 requests on 5/hour: %d admitted by Envoy (%d of them errors)", tc.name, admitted, errs)
		if admitted != tc.want || errs != 0 {
			t.Errorf("%s value: %d of 10 admitted (%d errors), want %d and no error", tc.name, admitted, errs, tc.want)
		}
	}
}

// Levels may hold dots, so a value such as "b.c_d" names a metric key that
// another descriptor's levels spell too, and an RLS domain may be named
// "http" as the HTTP rules' is. They count apart in the service, and the
// metrics, whose labels cannot tell them apart, sum them: a label set sent
// twice would fail every scrape of /metrics.
func TestAttackRLSMetricKeysCollide(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"x_1","limit_keys":["global"],"algorithm_config":{"rps":1,"burst":5}}]}`)
	p, addr, _ := startRLSServe(t, map[string]string{"http.yaml": `
domain: http
descriptors:
  - key: x
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 100}
`, "edge.yaml": `
domain: edge
descriptors:
  - key: x
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 100}
    descriptors:
      - key: a
        detailed_metric: true
        rate_limit: {unit: hour, requests_per_unit: 100}
        descriptors:
          - key: c
            detailed_metric: true
            rate_limit: {unit: hour, requests_per_unit: 100}
`}, "--rules", rules)
	client, _ := rlsClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	entries := func(kv ...string) *rlspb.RateLimitRequest {
		d := &common.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &common.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		return &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*common.RateLimitDescriptor{d}}
	}
	inHTTP := entries("x", "1")
	inHTTP.Domain = "http"
	for _, r := range []*rlspb.RateLimitRequest{entries("x", "1", "a", "b.c_d"), entries("x", "1", "a", "b", "c", "d"),
		entries("x", "1", "a", "b", "c", "d"), inHTTP} {
		if _, err := client.ShouldRateLimit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	resp, body := get(t, p.adminURL("/metrics"))
	const sample = `ratelimit_service_rate_limit_total_hits{domain="edge",key1="x_1",key2="a_b.c_d"}`
	t.Logf("/metrics: %d, %d bytes", resp.StatusCode, len(body))
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %.300s, want 200", resp.StatusCode, body)
	}
	if n := metric(t, p, sample); n != 3 {
		t.Errorf("%s = %v, want 3 (both keys' hits)", sample, n)
	}
	const inHTTPSample = `ratelimit_service_rate_limit_total_hits{domain="http",key1="x_1",key2=""}`
	if n := metric(t, p, inHTTPSample); n != 1 {
		t.Errorf("%s = %v, want 1 (the RLS hit; the HTTP rule has none)", inHTTPSample, n)
	}
}
