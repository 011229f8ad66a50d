package envoyrls

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

func statOf(t *testing.T, r *rls, key string) Stat {
	t.Helper()
	for _, s := range r.srv.Stats() {
		if s.Key == key {
			return s
		}
	}
	var keys []string
	for _, s := range r.srv.Stats() {
		keys = append(keys, s.Key)
	}
	slices.Sort(keys)
	t.Fatalf("no stat %q among %q", key, keys)
	return Stat{}
}

// The counters carry envoyproxy/ratelimit's keys and meanings, in hits.
func TestStatsCountHits(t *testing.T) {
	r := startRLS(t, Options{}, yamlMongoCps)
	if s := statOf(t, r, "mongo_cps.database_default"); s.TotalHits != 0 || s.Domain != "mongo_cps" || !slices.Equal(s.Levels, []string{"database_default"}) {
		t.Errorf("a limit's counters exist from the start, at 0: %+v", s)
	}
	r.admits(t, 501, "mongo_cps", desc("database", "users"))
	s := statOf(t, r, "mongo_cps.database_users")
	// Near the limit: admitted with under a fifth of the burst (100) left.
	want := Stat{Key: s.Key, Domain: s.Domain, Levels: s.Levels, TotalHits: 501, OverLimit: 1, NearLimit: 100, WithinLimit: 500}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("got %+v\nwant %+v", s, want)
	}
}

func TestStatsShadowMode(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: {requests_per_unit: 10, unit: second}
        shadow_mode: true
`)
	r.admits(t, 30, "example6", desc("service", "auth-service", "user", "user-a"))
	s := statOf(t, r, "example6.service.user_user-a")
	if s.TotalHits != 30 || s.WithinLimit != 10 || s.OverLimit != 20 || s.ShadowMode != 20 {
		t.Errorf("%+v", s)
	}
}

// detailed_metric and value_to_metric name request values, as the
// reference's examples 8 and 10 show; a wildcard without either keeps its
// pattern.
func TestStatsKeysNameValues(t *testing.T) {
	r := startRLS(t, Options{}, yamlExample8, yamlExample10, `
domain: example10_wildcard
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 100}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 100}
`)
	r.ask(t, "example8", desc("key1", "unspecified_value"))
	r.ask(t, "example8", desc("key1", "unspecified_value2"))
	r.ask(t, "example8", desc("key1", "value1"))
	r.ask(t, "example10", desc("route", "api", "http_method", "GET", "subject_id", "123"))
	r.ask(t, "example10", desc("route", "web", "http_method", "POST", "subject_id", "456"))
	r.ask(t, "example10_wildcard", desc("user", "alice", "action", "readfile", "resource", "documents"))
	r.ask(t, "example10_wildcard", desc("path", "/api/v1"))
	for _, key := range []string{
		"example8.key1_unspecified_value", "example8.key1_unspecified_value2", "example8.key1_value1",
		"example10.route_api.http_method_GET.subject_id", "example10.route_web.http_method_POST.subject_id",
		"example10_wildcard.user_alice.action_readfile.resource", "example10_wildcard.path_/api/*",
	} {
		if s := statOf(t, r, key); s.TotalHits != 1 {
			t.Errorf("%s: %+v", key, s)
		}
	}
}

// Keys that name request values are bounded: past MaxMetricKeys, new ones
// count under their limit's own key.
func TestStatsBoundKeys(t *testing.T) {
	r := startRLS(t, Options{MaxMetricKeys: 5}, `
domain: d
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
`)
	for i := range 100 {
		r.ask(t, "d", desc("user", fmt.Sprint(i)))
	}
	if n := len(r.srv.Stats()); n != 5 {
		t.Errorf("%d metric keys, want 5", n)
	}
	// The base key and four values fit; the other 96 count under the base.
	if s := statOf(t, r, "d.user"); s.TotalHits != 96 {
		t.Errorf("base key: %+v, want 96 hits", s)
	}
}

// A level is whole: a value's dots (an IPv4 address) are not level
// separators, in the counters Levels that the metric labels come from.
func TestStatsLevelsKeepValuesWhole(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: edge
descriptors:
  - key: remote_address
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: route
    value_to_metric: true
    descriptors:
      - key: host
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: a.b
    value: c.d
    rate_limit: {unit: second, requests_per_unit: 10}
`)
	r.ask(t, "edge", desc("remote_address", "203.0.113.9"))
	r.ask(t, "edge", desc("route", "v1.api", "host", "x.example"))
	r.ask(t, "edge", desc("a.b", "c.d"))
	for key, levels := range map[string][]string{
		"edge.remote_address_203.0.113.9": {"remote_address_203.0.113.9"},
		"edge.route_v1.api.host":          {"route_v1.api", "host"},
		"edge.a.b_c.d":                    {"a.b_c.d"},
		"edge.remote_address":             {"remote_address"},
	} {
		if s := statOf(t, r, key); !slices.Equal(s.Levels, levels) || s.Domain != "edge" {
			t.Errorf("%s: domain %q, levels %q, want %q", key, s.Domain, s.Levels, levels)
		}
	}
}

// Levels that show alike count apart: one entry whose value holds a dot
// and two entries whose levels join to the same text.
func TestStatsKeysDoNotCollide(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: d
descriptors:
  - key: a
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
    descriptors:
      - key: c
        detailed_metric: true
        rate_limit: {unit: second, requests_per_unit: 10}
`)
	r.ask(t, "d", desc("a", "b.c_d"))
	r.ask(t, "d", desc("a", "b", "c", "d"))
	r.ask(t, "d", desc("a", "b", "c", "d"))
	got := map[string]uint64{}
	for _, s := range r.srv.Stats() {
		if s.Key == "d.a_b.c_d" {
			got[strings.Join(s.Levels, "|")] = s.TotalHits
		}
	}
	if want := map[string]uint64{"a_b.c_d": 1, "a_b|c_d": 2}; !maps.Equal(got, want) {
		t.Errorf("the counters shown as d.a_b.c_d, by levels: %v, want %v", got, want)
	}
}

// A request value over 64 bytes is named by a digest in the metric keys,
// so that 500 values of 4 KB hold a few tens of KB of keys, not 2 MB,
// while distinct values still count apart.
func TestStatsKeysBoundLongValues(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: d
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
`)
	long := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("v", 4000) }
	for i := range 500 {
		r.ask(t, "d", desc("user", long(i)))
	}
	r.ask(t, "d", desc("user", long(0)))
	bytes := 0
	for _, s := range r.srv.Stats() {
		bytes += len(s.Key)
		if len(s.Key) > 100 {
			t.Fatalf("a key of %d bytes: %.100s…", len(s.Key), s.Key)
		}
	}
	if n := len(r.srv.Stats()); n != 501 {
		t.Errorf("%d metric keys, want 501 (the base key and 500 values)", n)
	}
	if bytes > 20_000 {
		t.Errorf("the metric keys hold %d bytes, want under 20 KB", bytes)
	}
	sum := sha256.Sum256([]byte(long(0)))
	if s := statOf(t, r, "d.user_sha256-"+hex.EncodeToString(sum[:8])); s.TotalHits != 2 || !slices.Equal(s.Levels, []string{"user_sha256-" + hex.EncodeToString(sum[:8])}) {
		t.Errorf("the digest of the first value: %+v, want 2 hits", s)
	}
	// A value of exactly 64 bytes is kept.
	v64 := strings.Repeat("w", 64)
	r.ask(t, "d", desc("user", v64))
	statOf(t, r, "d.user_"+v64)
	// A request-carried limit names every entry: 32 of 64-byte keys and
	// values are 4 KB, bounded at 512 bytes by a digest of the rest.
	var kv []string
	for i := range 32 {
		kv = append(kv, fmt.Sprintf("%064d", i), v64)
	}
	d := desc(kv...)
	d.Limit = &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_SECOND}
	r.ask(t, "d", d)
	for _, s := range r.srv.Stats() {
		if len(s.Levels) > 1 {
			if len(s.Key) > 600 || len(s.Levels) != 4 || !strings.HasPrefix(s.Levels[3], "sha256-") {
				t.Errorf("32 entries of 129 bytes: a key of %d bytes, levels %.200q", len(s.Key), s.Levels)
			}
		}
	}
}
