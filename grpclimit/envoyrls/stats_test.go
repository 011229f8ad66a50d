package envoyrls

import (
	"fmt"
	"slices"
	"testing"
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
