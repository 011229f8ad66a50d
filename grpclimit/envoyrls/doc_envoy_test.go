package envoyrls

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	yaml "go.yaml.in/yaml/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The envoy.yaml fragment of docs/envoy.md is valid Envoy configuration:
// each part decodes into Envoy's own messages, field names and @types
// checked, and passes their validation rules; the filter points at the
// domain of the page's configuration.
func TestDocEnvoyFragment(t *testing.T) {
	var doc map[string][]any
	if err := yaml.Unmarshal([]byte(docBlock(t, "http_filters:")), &doc); err != nil {
		t.Fatal(err)
	}
	decode := func(part string, v any, m proto.Message) {
		t.Helper()
		js, err := json.Marshal(jsonable(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := protojson.Unmarshal(js, m); err != nil {
			t.Fatalf("%s: %v\n%s", part, err, js)
		}
		if v, ok := m.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				t.Errorf("%s: %v", part, err)
			}
		}
	}
	for _, k := range []string{"http_filters", "rate_limits", "clusters"} {
		if len(doc[k]) == 0 {
			t.Fatalf("the fragment has no %s", k)
		}
	}
	var filter ratelimitfilter.RateLimit
	for i, f := range doc["http_filters"] {
		var hf hcm.HttpFilter
		decode(fmt.Sprintf("http_filters[%d]", i), f, &hf)
		if hf.GetTypedConfig().MessageIs(&filter) {
			if err := hf.GetTypedConfig().UnmarshalTo(&filter); err != nil {
				t.Fatal(err)
			}
		}
	}
	if filter.GetDomain() != "edge" || filter.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName() != "faucet_rls" {
		t.Errorf("the rate-limit filter: %v", &filter)
	}
	for i, r := range doc["rate_limits"] {
		decode(fmt.Sprintf("rate_limits[%d]", i), r, &routev3.RateLimit{})
	}
	for i, c := range doc["clusters"] {
		var cl clusterv3.Cluster
		decode(fmt.Sprintf("clusters[%d]", i), c, &cl)
		if cl.GetName() != "faucet_rls" {
			t.Errorf("cluster %q, want faucet_rls", cl.GetName())
		}
	}
}

// docBlock returns the YAML block of docs/envoy.md that starts with first.
func docBlock(t *testing.T, first string) string {
	t.Helper()
	page, err := os.ReadFile("../../docs/envoy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "```yaml\n"+first)
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/envoy.md has no YAML block starting with %q", first)
	}
	return first + block
}

// jsonable turns what yaml.v2 decodes into what encoding/json encodes.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i := range v {
			v[i] = jsonable(v[i])
		}
		return v
	}
	return v
}

// The example configuration of docs/envoy.md loads, and denies the address
// it says never passes.
func TestDocRLSConfig(t *testing.T) {
	r := startRLS(t, Options{}, docBlock(t, "# DIR/edge.yaml\n"))
	if resp := r.ask(t, "edge", desc("remote_address", "203.0.113.9")); resp.OverallCode != over {
		t.Errorf("203.0.113.9: %v", resp)
	}
	if got := r.admits(t, 11, "edge", desc("remote_address", "192.0.2.1")); got != 10 {
		t.Errorf("10 a second per address: %d admitted", got)
	}
	if got := r.admits(t, 101, "edge", desc("path", "/api/users")); got != 100 {
		t.Errorf("100 a minute per path under /api/: %d admitted", got)
	}
}

// The calendar-quota example of docs/envoy.md loads, and renews as its
// comments say: the tenant's month on the 15th at midnight in Berlin, the
// user's week on Monday at midnight UTC.
func TestDocRLSCalendar(t *testing.T) {
	now := time.Date(2024, time.May, 14, 21, 0, 0, 0, time.UTC) // Tuesday, 23:00 in Berlin
	r := startAt(t, now, Options{}, docBlock(t, "# DIR/billing.yaml\n"))
	all := desc("tenant", "t")
	all.HitsAddend = wrapperspb.UInt64(1000)
	if resp := r.ask(t, "billing", all); resp.OverallCode != ok {
		t.Errorf("1000 at once: %v, want OK", resp)
	}
	st := r.ask(t, "billing", desc("tenant", "t")).Statuses[0]
	if st.Code != over || st.DurationUntilReset.AsDuration() != time.Hour {
		t.Errorf("the 1001st: %v, want OVER_LIMIT until midnight in Berlin, in 1h", st)
	}
	if got := r.admits(t, 51, "billing", desc("user", "u")); got != 50 {
		t.Errorf("user: %d of 51 admitted, want 50", got)
	}
	st = r.ask(t, "billing", desc("user", "u")).Statuses[0]
	if want := 5*24*time.Hour + 3*time.Hour; st.DurationUntilReset.AsDuration() != want {
		t.Errorf("user's reset in %v, want %v (Monday 00:00 UTC)", st.DurationUntilReset.AsDuration(), want)
	}
}
