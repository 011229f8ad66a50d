package envoyrls

import (
	"math"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// The examples of envoyproxy/ratelimit's README, each with its documented
// outcome in token-bucket terms: a limit of N per unit admits N at once
// (the burst) and then N per unit, spread evenly. The clock is virtual and
// stands still unless a test moves it.

const (
	ok   = pb.RateLimitResponse_OK
	over = pb.RateLimitResponse_OVER_LIMIT
)

// The configurations of the reference's examples that several tests use.
const (
	yamlMongoCps = `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit: {unit: second, requests_per_unit: 500}
  - key: database
    value: default
    rate_limit: {unit: second, requests_per_unit: 500}
`
	yamlExample8 = `
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: key1
    value: value1
    rate_limit: {unit: minute, requests_per_unit: 20}
`
	yamlExample10 = `
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
`
)

func TestExampleOneLimitPerValue(t *testing.T) {
	r := startRLS(t, Options{}, yamlMongoCps)
	if got := r.admits(t, 501, "mongo_cps", desc("database", "users")); got != 500 {
		t.Errorf("users: %d of 501 admitted, want 500", got)
	}
	if got := r.admits(t, 3, "mongo_cps", desc("database", "default")); got != 3 {
		t.Errorf("default has its own bucket: %d of 3 admitted", got)
	}
	resp := r.ask(t, "mongo_cps", desc("database", "other"))
	if resp.OverallCode != ok || resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("a value with no limit: %v", resp)
	}
	// A rolling window: 2 ms later one token (500/s) is back, not a
	// whole second's worth at a boundary.
	r.clock.advance(2 * time.Millisecond)
	if got := r.admits(t, 2, "mongo_cps", desc("database", "users")); got != 1 {
		t.Errorf("2 ms later: %d admitted, want 1", got)
	}
}

func TestExampleNestedAndSeveralDescriptors(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100}
`)
	marketing := desc("message_type", "marketing", "to_number", "2061111111")
	number := desc("to_number", "2061111111")
	if got := r.admits(t, 8, "messaging", marketing, number); got != 5 {
		t.Errorf("%d marketing messages admitted, want 5 a day", got)
	}
	resp := r.ask(t, "messaging", marketing, number)
	if resp.OverallCode != over || resp.Statuses[0].Code != over || resp.Statuses[1].Code != ok {
		t.Fatalf("the marketing limit denies, the number's does not: %v", resp)
	}
	// Denials took nothing from the number's bucket: 100 - 5 left.
	if got := resp.Statuses[1].LimitRemaining; got != 95 {
		t.Errorf("the number's bucket holds %d, want 95 (denied requests take nothing)", got)
	}
	if got := r.admits(t, 95, "messaging", number); got != 95 {
		t.Errorf("%d plain messages admitted, want 95", got)
	}
	if got := r.admits(t, 1, "messaging", desc("message_type", "marketing", "to_number", "2062222222")); got != 1 {
		t.Error("another number has its own marketing bucket")
	}
	// A day's 5 come back evenly: one every 4.8 hours.
	r.clock.advance(4*time.Hour + 48*time.Minute)
	if got := r.admits(t, 2, "messaging", marketing); got != 1 {
		t.Errorf("4.8 h later: %d admitted, want 1", got)
	}
}

func TestExampleMostSpecificMatch(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
`)
	if got := r.admits(t, 11, "edge_proxy_per_ip", desc("remote_address", "50.0.0.1")); got != 10 {
		t.Errorf("50.0.0.1: %d admitted, want 10", got)
	}
	if got := r.admits(t, 11, "edge_proxy_per_ip", desc("remote_address", "50.0.0.2")); got != 10 {
		t.Errorf("each address has its own bucket: %d admitted, want 10", got)
	}
	r.clock.advance(time.Hour)
	resp := r.ask(t, "edge_proxy_per_ip", desc("remote_address", "50.0.0.5"))
	if resp.OverallCode != over || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 0 {
		t.Errorf("requests_per_unit 0 denies every request: %v", resp)
	}
}

func TestExampleSameDepthOnly(t *testing.T) {
	flat := startRLS(t, Options{}, `
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit: {requests_per_unit: 300, unit: second}
`)
	resp := flat.ask(t, "example4", desc("key", "value", "subkey", "subvalue"))
	if resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("a two-entry descriptor matched a one-level limit: %v", resp)
	}
	nested := startRLS(t, Options{}, `
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit: {requests_per_unit: 300, unit: second}
`)
	resp = nested.ask(t, "example4", desc("key", "value", "subkey", "subvalue"))
	if resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 300 || resp.Statuses[0].LimitRemaining != 299 {
		t.Errorf("the nested limit applies: %v", resp)
	}
	if resp := nested.ask(t, "example4", desc("key", "value")); resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("a one-entry descriptor matched a two-level limit: %v", resp)
	}
}

func TestExampleUnlimited(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: internal
descriptors:
  - key: ldap
    rate_limit: {unlimited: true}
  - key: azure
    rate_limit: {unit: minute, requests_per_unit: 100}
`)
	for range 1000 {
		resp := r.ask(t, "internal", desc("ldap", "x"))
		if resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != math.MaxUint32 {
			t.Fatalf("unlimited: %v", resp)
		}
	}
	if got := r.admits(t, 101, "internal", desc("azure", "x")); got != 100 {
		t.Errorf("azure: %d admitted, want 100", got)
	}
}

func TestExampleShadowMode(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: {requests_per_unit: 10, unit: second}
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit: {requests_per_unit: 20, unit: second}
`)
	a := desc("service", "auth-service", "user", "user-a")
	if got := r.admits(t, 30, "example6", a); got != 30 {
		t.Errorf("shadow mode: %d of 30 admitted, want all", got)
	}
	resp := r.ask(t, "example6", a)
	if resp.Statuses[0].Code != ok || resp.Statuses[0].LimitRemaining != 0 {
		t.Errorf("a shadow limit reports OK, with its bucket empty: %v", resp)
	}
	if got := r.admits(t, 21, "example6", desc("service", "auth-service", "user", "user-b")); got != 20 {
		t.Errorf("user-b: %d admitted, want 20", got)
	}
}

func TestExampleReplaces(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit: {name: specific_limit, requests_per_unit: 5, unit: second}
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces: [{name: specific_limit}]
          requests_per_unit: 10
          unit: second
`)
	one := desc("key_1", "value_1", "user", "bkthomps")
	two := desc("key_2", "value_2", "user", "bkthomps")
	if got := r.admits(t, 11, "example7", one, two); got != 10 {
		t.Errorf("both: %d admitted, want 10 (the 5/s limit is replaced)", got)
	}
	resp := r.ask(t, "example7", one, two)
	if resp.Statuses[0].CurrentLimit != nil || resp.Statuses[0].Code != ok {
		t.Errorf("the replaced limit is not evaluated: %v", resp.Statuses[0])
	}
	// The replaced limit's bucket was never touched.
	if got := r.admits(t, 6, "example7", one); got != 5 {
		t.Errorf("alone: %d admitted, want 5", got)
	}
}

func TestExampleDetailedMetricLimits(t *testing.T) {
	r := startRLS(t, Options{}, yamlExample8)
	if got := r.admits(t, 11, "example8", desc("key1", "unspecified_value")); got != 10 {
		t.Errorf("unspecified value: %d admitted, want 10", got)
	}
	if got := r.admits(t, 11, "example8", desc("key1", "unspecified_value2")); got != 10 {
		t.Errorf("another unspecified value: %d admitted, want 10", got)
	}
	if got := r.admits(t, 21, "example8", desc("key1", "value1")); got != 20 {
		t.Errorf("value1: %d admitted, want 20", got)
	}
}

func TestExampleWildcards(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: route
    value: /api/*/resource/*/action
    rate_limit: {unit: minute, requests_per_unit: 20}
`)
	for _, d := range [][]string{
		{"key1", "value1"}, {"key1", "valueXYZ"}, {"path", "/api/123/action"}, {"route", "/api/v1/resource/123/action"},
	} {
		if got := r.admits(t, 21, "example9", desc(d...)); got != 20 {
			t.Errorf("%v: %d admitted, want 20", d, got)
		}
	}
	for _, d := range [][]string{{"key1", "other"}, {"path", "/api/123/other"}, {"route", "/api/v1/resource/action"}} {
		if resp := r.ask(t, "example9", desc(d...)); resp.Statuses[0].CurrentLimit != nil {
			t.Errorf("%v matched: %v", d, resp)
		}
	}
}

func TestExampleValueToMetricLimits(t *testing.T) {
	r := startRLS(t, Options{}, yamlExample10)
	if got := r.admits(t, 61, "example10", desc("route", "api", "http_method", "GET", "subject_id", "123")); got != 60 {
		t.Errorf("%d admitted, want 60", got)
	}
	if got := r.admits(t, 61, "example10", desc("route", "web", "http_method", "POST", "subject_id", "456")); got != 60 {
		t.Errorf("other values have their own bucket: %d admitted, want 60", got)
	}
}

func TestExampleShareThreshold(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit: {unit: hour, requests_per_unit: 10}
`)
	if got := r.admits(t, 5, "example11", desc("files", "files/a.pdf")) + r.admits(t, 5, "example11", desc("files", "files/b.csv")); got != 10 {
		t.Fatalf("%d admitted, want 10", got)
	}
	if resp := r.ask(t, "example11", desc("files", "files/c.txt")); resp.OverallCode != over {
		t.Errorf("files/c.txt shares the exhausted threshold: %v", resp)
	}
	if got := r.admits(t, 11, "example11", desc("files_no_share", "files_no_share/a.pdf")); got != 10 {
		t.Errorf("a.pdf: %d admitted, want 10", got)
	}
	if got := r.admits(t, 10, "example11", desc("files_no_share", "files_no_share/b.csv")); got != 10 {
		t.Errorf("b.csv has its own threshold: %d admitted, want 10", got)
	}
}
