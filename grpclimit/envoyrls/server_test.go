package envoyrls

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/faucetgo/faucet/engine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const perUser = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 15}
`

// The cost is the descriptor's hits_addend, else the request's, else 1; a
// descriptor's hits_addend of 0 only looks.
func TestHitsAddend(t *testing.T) {
	r := startRLS(t, Options{}, perUser)
	ask := func(reqAddend uint32, d *common.RateLimitDescriptor) *pb.RateLimitResponse {
		resp, err := r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{d}, HitsAddend: reqAddend})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if got := ask(4, desc("user", "a")).Statuses[0].LimitRemaining; got != 6 {
		t.Errorf("request hits_addend 4: %d left, want 6", got)
	}
	d := desc("user", "a")
	d.HitsAddend = wrapperspb.UInt64(5)
	if got := ask(4, d).Statuses[0].LimitRemaining; got != 1 {
		t.Errorf("descriptor hits_addend 5 over the request's 4: %d left, want 1", got)
	}
	d.HitsAddend = wrapperspb.UInt64(0)
	if resp := ask(0, d); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 1 {
		t.Errorf("hits_addend 0 looks without taking: %v", resp)
	}
	d.HitsAddend = wrapperspb.UInt64(2)
	if resp := ask(0, d); resp.OverallCode != over || resp.Statuses[0].LimitRemaining != 1 {
		t.Errorf("a cost above what is left is denied and takes nothing: %v", resp)
	}
	d.HitsAddend = wrapperspb.UInt64(1 << 40)
	if resp := ask(0, d); resp.OverallCode != over || resp.Statuses[0].DurationUntilReset != nil {
		t.Errorf("a cost above the burst never passes, and says so: %v", resp)
	}
}

// A descriptor's hits_addend of 0 takes nothing, but answers OVER_LIMIT
// when a cost of 1 would be denied: a look at an empty bucket is no way
// past it.
func TestZeroHitsOnAnEmptyBucket(t *testing.T) {
	r := startRLS(t, Options{}, perUser)
	look := desc("user", "z")
	look.HitsAddend = wrapperspb.UInt64(0)
	if got := r.admits(t, 10, "api", desc("user", "z")); got != 10 {
		t.Fatalf("%d of 10 admitted", got)
	}
	resp := r.ask(t, "api", look)
	st := resp.Statuses[0]
	if resp.OverallCode != over || st.Code != over || st.LimitRemaining != 0 {
		t.Errorf("a look at an empty bucket: %v, want OVER_LIMIT", resp)
	}
	// One token comes in 100 ms at 10 a second.
	if d := st.DurationUntilReset.AsDuration(); d <= 0 || d > 100*time.Millisecond {
		t.Errorf("duration_until_reset %v, want the wait for one token (100 ms)", d)
	}
	// With a denied look beside it, the other descriptor keeps its tokens.
	if resp := r.ask(t, "api", look, desc("tenant", "t")); resp.OverallCode != over || resp.Statuses[1].LimitRemaining != 15 {
		t.Errorf("a denied look beside a bucket of 15: %v, want OVER_LIMIT and 15 left", resp)
	}
	r.clock.advance(100 * time.Millisecond)
	if resp := r.ask(t, "api", look); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 1 {
		t.Errorf("a look at one token: %v, want OK and the token still there", resp)
	}
	if got := r.admits(t, 2, "api", desc("user", "z")); got != 1 {
		t.Errorf("after the looks, %d of 2 admitted, want 1 (the looks took nothing)", got)
	}
}

// A hits_addend far above any burst is denied and counted as one more
// than the largest burst, so that the hit counters cannot wrap.
func TestHugeHitsAddendCannotWrapCounters(t *testing.T) {
	r := startRLS(t, Options{}, perUser)
	d := desc("user", "h")
	d.HitsAddend = wrapperspb.UInt64(1 << 63)
	for range 3 {
		if resp := r.ask(t, "api", d); resp.OverallCode != over {
			t.Fatalf("hits_addend 2^63: %v, want OVER_LIMIT", resp)
		}
	}
	s := statOf(t, r, "api.user")
	if s.TotalHits != 3*(1e9+1) || s.OverLimit != 3*(1e9+1) {
		t.Errorf("counters %+v, want 3 × %d hits, all over", s, uint64(1e9+1))
	}
	if got := r.admits(t, 11, "api", desc("user", "h")); got != 10 {
		t.Errorf("after them, %d of 11 admitted, want 10 (nothing was taken)", got)
	}
}

// A limit carried by the request has buckets apart from the configured
// limit's, shared by requests with the same override.
func TestLimitOverride(t *testing.T) {
	r := startRLS(t, Options{MaxOverrides: 2}, perUser)
	withLimit := func(n uint32, unit typev3.RateLimitUnit) *common.RateLimitDescriptor {
		d := desc("user", "a")
		d.Limit = &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: unit}
		return d
	}
	if got := r.admits(t, 4, "api", withLimit(3, typev3.RateLimitUnit_MINUTE)); got != 3 {
		t.Errorf("override 3/min: %d admitted, want 3", got)
	}
	if got := r.admits(t, 11, "api", desc("user", "a")); got != 10 {
		t.Errorf("the configured limit's bucket is apart: %d admitted, want 10", got)
	}
	resp := r.ask(t, "api", withLimit(3, typev3.RateLimitUnit_MINUTE))
	if l := resp.Statuses[0].CurrentLimit; l.GetRequestsPerUnit() != 3 || l.GetUnit() != pb.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("current_limit %v, want the override", l)
	}
	// Overrides apply to descriptors that match no configured limit, but
	// not in an unknown domain, as in the reference.
	other := withLimit(2, typev3.RateLimitUnit_HOUR)
	other.Entries[0].Key = "nothing"
	if got := r.admits(t, 3, "api", other); got != 2 {
		t.Errorf("override on a descriptor with no configured limit: %d admitted, want 2", got)
	}
	if got := r.admits(t, 3, "elsewhere", withLimit(2, typev3.RateLimitUnit_HOUR)); got != 3 {
		t.Errorf("override in an unknown domain: %d admitted, want 3 (ignored)", got)
	}
	// No room for a third: OVER_LIMIT, not an error, which Envoy would
	// take as a reason to let the request through.
	if resp := r.ask(t, "api", withLimit(7, typev3.RateLimitUnit_DAY)); resp.OverallCode != over {
		t.Errorf("a third distinct override with MaxOverrides 2: %v, want OVER_LIMIT", resp)
	}
	if got := r.admits(t, 1, "api", withLimit(0, typev3.RateLimitUnit_DAY)); got != 0 {
		t.Error("an override of 0 requests denies")
	}
}

// Request-carried limits are bounded per domain, and room is made only by
// unbinding an override whose buckets are full again (after its unit): the
// least recently used when a new one needs room, any after OverrideIdle.
func TestOverridesBoundedPerDomain(t *testing.T) {
	r := startRLS(t, Options{MaxOverrides: 4}, perUser, "domain: web\ndescriptors:\n  - key: page\n    rate_limit: {unit: second, requests_per_unit: 5}\n")
	withLimit := func(n uint32, unit typev3.RateLimitUnit) *common.RateLimitDescriptor {
		d := desc("user", "a")
		d.Limit = &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: unit}
		return d
	}
	perMin := func(n uint32) *common.RateLimitDescriptor { return withLimit(n, typev3.RateLimitUnit_MINUTE) }
	code := func(domain string, d *common.RateLimitDescriptor) pb.RateLimitResponse_Code {
		return r.ask(t, domain, d).OverallCode
	}
	want := func(what string, got OverrideStats, bound int, evicted, refused uint64) {
		t.Helper()
		if got.Bound != bound || got.Evicted != evicted || got.Refused != refused {
			t.Errorf("%s: %+v, want %d bound, %d evicted, %d refused", what, got, bound, evicted, refused)
		}
	}
	// Two domains: two overrides each.
	code("api", perMin(3)) // t=0
	r.clock.advance(10 * time.Second)
	code("api", perMin(4)) // t=10
	r.clock.advance(20 * time.Second)
	resp := r.ask(t, "api", perMin(5)) // t=30: 3/min is full at 61
	if resp.OverallCode != over || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 {
		t.Errorf("a third override in api: %v, want OVER_LIMIT for 5/min", resp)
	}
	if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d != 31*time.Second {
		t.Errorf("duration_until_reset %v, want 31s (until 3/min's buckets are full)", d)
	}
	want("api full", r.srv.OverrideStats(), 2, 0, 1)
	if code("web", perMin(3)) != ok || code("web", perMin(4)) != ok {
		t.Error("api's overrides took web's room")
	}
	if code("elsewhere", perMin(9)) != ok {
		t.Error("an override in an unknown domain is ignored")
	}
	want("both full", r.srv.OverrideStats(), 4, 0, 1)
	r.clock.advance(31 * time.Second) // t=61
	if code("api", perMin(5)) != ok {
		t.Error("5/min once 3/min's buckets are full: not bound")
	}
	want("3/min evicted", r.srv.OverrideStats(), 4, 1, 1)
	if code("api", perMin(3)) != over {
		t.Error("3/min again at t=61: bound, though 4/min's buckets fill at 71")
	}
	r.clock.advance(10 * time.Second) // t=71
	if code("api", perMin(3)) != ok {
		t.Error("3/min at t=71: not bound")
	}
	want("4/min evicted", r.srv.OverrideStats(), 4, 2, 2)
	// One a day is not unbound before a day, idle or not; it took 5/min's
	// room, and 11 minutes idle unbind the other three.
	r.clock.advance(61 * time.Second)
	code("api", withLimit(1, typev3.RateLimitUnit_DAY))
	r.clock.advance(11 * time.Minute)
	r.ask(t, "api", desc("user", "b"))
	want("idle 11 min", r.srv.OverrideStats(), 1, 6, 2)
	if code("api", withLimit(1, typev3.RateLimitUnit_DAY)) != over {
		t.Error("1/day was unbound before its bucket was full: its request passed again")
	}
}

// A reload that adds a domain shrinks every share: the new domain's
// overrides take room from a domain over its share, once that room's
// buckets are full.
func TestOverridesAfterReloadAddsADomain(t *testing.T) {
	r := startRLS(t, Options{MaxOverrides: 4}, perUser)
	perMin := func(n uint32) *common.RateLimitDescriptor {
		d := desc("user", "a")
		d.Limit = &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit_MINUTE}
		return d
	}
	for n := range uint32(4) {
		if r.ask(t, "api", perMin(n+1)).OverallCode != ok {
			t.Fatalf("override %d/min in api, alone: not bound", n+1)
		}
		r.clock.advance(time.Second)
	}
	api, _ := ParseDomain("api.yaml", []byte(perUser))
	web, _ := ParseDomain("web.yaml", []byte("domain: web\ndescriptors:\n  - key: page\n    rate_limit: {unit: second, requests_per_unit: 5}\n"))
	cfg, err := NewConfig(api, web)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.srv.Load(cfg); err != nil {
		t.Fatal(err)
	}
	if resp := r.ask(t, "web", perMin(9)); resp.OverallCode != over || resp.Statuses[0].DurationUntilReset.AsDuration() != 57*time.Second {
		t.Errorf("web's first override, api holding all 4 (not full): %v, want OVER_LIMIT in 57s", resp)
	}
	r.clock.advance(58 * time.Second) // api's first two are full
	if r.ask(t, "web", perMin(9)).OverallCode != ok || r.ask(t, "web", perMin(8)).OverallCode != ok {
		t.Error("web's two overrides once api's oldest are full: not bound")
	}
	if got := r.srv.OverrideStats(); got.Bound != 4 || got.Evicted != 2 {
		t.Errorf("%+v, want 4 bound, 2 of api's evicted", got)
	}
	if r.ask(t, "web", perMin(7)).OverallCode != over {
		t.Error("a third in web, at its share of 2: bound")
	}
}

// A quota_mode limit denies only when every quota_mode limit that matched
// is exhausted; an exhausted one is reported and takes nothing.
func TestQuotaMode(t *testing.T) {
	r := startRLS(t, Options{}, `
domain: q
descriptors:
  - key: daily
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: bonus
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: user
    rate_limit: {unit: second, requests_per_unit: 100}
`)
	daily, bonus, user := desc("daily", "u"), desc("bonus", "u"), desc("user", "u")
	if got := r.admits(t, 8, "q", daily, bonus, user); got != 3 {
		t.Errorf("%d admitted, want 3 (the larger quota; both are exhausted after)", got)
	}
	resp := r.ask(t, "q", daily, bonus, user)
	if resp.OverallCode != over || resp.Statuses[0].Code != over || resp.Statuses[1].Code != over {
		t.Errorf("every quota exhausted: %v", resp)
	}
	// The user limit lost only the 3 admitted requests.
	if got := resp.Statuses[2].LimitRemaining; got != 97 {
		t.Errorf("user bucket holds %d, want 97", got)
	}
}

func TestGlobalShadowMode(t *testing.T) {
	r := startRLS(t, Options{ShadowMode: true}, perUser)
	if got := r.admits(t, 20, "api", desc("user", "a")); got != 20 {
		t.Errorf("%d of 20 admitted in global shadow mode", got)
	}
	if resp := r.ask(t, "api", desc("user", "a")); resp.Statuses[0].Code != over {
		t.Errorf("the status still says OVER_LIMIT: %v", resp.Statuses[0])
	}
}

// The IETF fields describe every limit, and a denial carries Retry-After,
// never earlier than the refill.
func TestResponseHeaders(t *testing.T) {
	r := startRLS(t, Options{Headers: true}, perUser)
	resp := r.ask(t, "api", desc("user", "a"), desc("tenant", "t"))
	h := map[string]string{}
	for _, v := range resp.ResponseHeadersToAdd {
		h[v.Key] = v.Value
	}
	if want := `"api.user";q=10;w=1, "api.tenant";q=15;w=1`; h["Ratelimit-Policy"] != want {
		t.Errorf("RateLimit-Policy %q, want %q", h["Ratelimit-Policy"], want)
	}
	if want := `"api.user";r=9;t=0, "api.tenant";r=14;t=0`; h["Ratelimit"] != want {
		t.Errorf("RateLimit %q, want %q", h["Ratelimit"], want)
	}
	if _, ok := h["Retry-After"]; ok {
		t.Error("Retry-After on an admitted request")
	}
	r.admits(t, 9, "api", desc("user", "a"))
	resp = r.ask(t, "api", desc("user", "a"))
	h = map[string]string{}
	for _, v := range resp.ResponseHeadersToAdd {
		h[v.Key] = v.Value
	}
	if h["Retry-After"] != "1" || h["Ratelimit"] != `"api.user";r=0;t=1` {
		t.Errorf("denied: %v", h)
	}
}

// A shadow_mode descriptor stays out of the header fields unless
// ShadowHeaders asks for it: it denies nothing, so a client must not back
// off for it.
func TestShadowDescriptorsLeftOutOfHeaders(t *testing.T) {
	const cfg = `
domain: sh
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: tenant
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
`
	for _, tt := range []struct {
		opts Options
		want string
	}{
		{Options{Headers: true}, `"sh.user";q=5;w=1`},
		{Options{Headers: true, ShadowHeaders: true}, `"sh.user";q=5;w=1, "sh.tenant";q=1;w=1`},
	} {
		r := startRLS(t, tt.opts, cfg)
		resp := r.ask(t, "sh", desc("user", "u"), desc("tenant", "t"))
		var got string
		for _, v := range resp.ResponseHeadersToAdd {
			if v.Key == "Ratelimit-Policy" {
				got = v.Value
			}
		}
		if got != tt.want {
			t.Errorf("ShadowHeaders %v: RateLimit-Policy %q, want %q", tt.opts.ShadowHeaders, got, tt.want)
		}
	}
}

// A denial that can never pass (a limit of 0 requests, a cost above the
// burst) carries no Retry-After, which would send the client back for
// nothing, and its reason says so; a denial that will pass carries both.
func TestHeadersOfDenialsThatNeverPass(t *testing.T) {
	r := startRLS(t, Options{Headers: true}, perUser, `
domain: zero
descriptors:
  - key: remote_address
    value: 203.0.113.9
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: user
    rate_limit: {unit: second, requests_per_unit: 5}
`)
	headers := func(resp *pb.RateLimitResponse) map[string]string {
		h := map[string]string{}
		for _, v := range resp.ResponseHeadersToAdd {
			h[v.Key] = v.Value
		}
		return h
	}
	big := desc("user", "b")
	big.HitsAddend = wrapperspb.UInt64(6)
	for _, c := range []struct {
		name  string
		descs []*common.RateLimitDescriptor
	}{
		{"requests_per_unit 0", []*common.RateLimitDescriptor{desc("remote_address", "203.0.113.9")}},
		{"requests_per_unit 0 beside a bucket", []*common.RateLimitDescriptor{desc("remote_address", "203.0.113.9"), desc("user", "u")}},
		{"a cost of 6 over a burst of 5", []*common.RateLimitDescriptor{big}},
	} {
		resp := r.ask(t, "zero", c.descs...)
		h := headers(resp)
		if resp.OverallCode != over || h["Retry-After"] != "" || h["X-Faucet-Reason"] != "cost_exceeds_burst" {
			t.Errorf("%s: %v, headers %v; want OVER_LIMIT, no Retry-After, reason cost_exceeds_burst", c.name, resp.OverallCode, h)
		}
	}
	r.admits(t, 5, "zero", desc("user", "u"))
	h := headers(r.ask(t, "zero", desc("user", "u")))
	if h["Retry-After"] == "" || h["X-Faucet-Reason"] != "token_bucket_exceeded" {
		t.Errorf("an empty bucket: %v, want Retry-After and reason token_bucket_exceeded", h)
	}
}

// Requests outside the protocol's rules or the bounds are refused with
// InvalidArgument naming the field, never a panic.
func TestBadRequests(t *testing.T) {
	r := startRLS(t, Options{MaxDescriptors: 4, MaxEntries: 3, MaxEntryBytes: 64}, perUser)
	many := func(n int) []*common.RateLimitDescriptor {
		out := make([]*common.RateLimitDescriptor, n)
		for i := range out {
			out[i] = desc("user", fmt.Sprint(i))
		}
		return out
	}
	for name, tc := range map[string]struct {
		req  *pb.RateLimitRequest
		code codes.Code
		want string
	}{
		"no domain":          {&pb.RateLimitRequest{Descriptors: many(1)}, codes.InvalidArgument, "domain: must not be empty"},
		"no descriptors":     {&pb.RateLimitRequest{Domain: "api"}, codes.InvalidArgument, "descriptors: must not be empty"},
		"too many":           {&pb.RateLimitRequest{Domain: "api", Descriptors: many(5)}, codes.InvalidArgument, "descriptors: 5, at most 4 (Options.MaxDescriptors)"},
		"no entries":         {&pb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{{}}}, codes.InvalidArgument, "descriptors[0].entries: must not be empty"},
		"too many entries":   {&pb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{desc("a", "1", "b", "2", "c", "3", "d", "4")}}, codes.InvalidArgument, "descriptors[0].entries: 4, at most 3"},
		"empty key":          {&pb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{desc("", "1")}}, codes.InvalidArgument, "descriptors[0].entries[0].key: must not be empty"},
		"unknown unit":       {&pb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{{Entries: desc("user", "a").Entries, Limit: &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}}}}, codes.InvalidArgument, "descriptors[0].limit.unit: UNKNOWN is not one of"},
		"override too large": {&pb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{{Entries: desc("user", "a").Entries, Limit: &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 4e9, Unit: typev3.RateLimitUnit_DAY}}}}, codes.InvalidArgument, "Burst must be between 1 and 1e9 tokens"},
		"10 MB":              {&pb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{desc("user", strings.Repeat("x", 10<<20))}}, codes.ResourceExhausted, "larger than max"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.client.ShouldRateLimit(context.Background(), tc.req)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %v with %q", err, tc.code, tc.want)
			}
		})
	}
}

// Envoy puts a header's value in a descriptor as the client sent it, empty
// or as long as Envoy takes, and admits the request when the service
// answers an error (failure_mode_deny is off by default), so no value may
// be an error: an empty value is a value; a long one is over a limit it
// matches, and OK where it matches none.
func TestClientValuesNeverError(t *testing.T) {
	r := startRLS(t, Options{MaxEntryBytes: 64}, perUser)
	long := strings.Repeat("x", 100)
	if n := r.admits(t, 12, "api", desc("user", "")); n != 10 {
		t.Errorf("empty user: %d of 12 admitted, want 10 (the limit)", n)
	}
	resp := r.ask(t, "api", desc("user", long))
	if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 {
		t.Errorf("long user: %v, want OVER_LIMIT under the user limit", resp)
	}
	ov := &common.RateLimitDescriptor{Entries: desc("user", long).Entries,
		Limit: &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 100, Unit: typev3.RateLimitUnit_SECOND}}
	if resp := r.ask(t, "api", ov); resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("long user with an override: %v, want OVER_LIMIT", resp.OverallCode)
	}
	if n := r.admits(t, 3, "api", desc("other", long)); n != 3 {
		t.Errorf("long value of no limit: %d of 3 admitted, want 3", n)
	}
	if n := r.admits(t, 3, "unknown", desc("user", long)); n != 3 {
		t.Errorf("long value in an unknown domain: %d of 3 admitted, want 3", n)
	}
}

// A reload keeps the buckets of limits that did not change, and in memory
// retunes those that did.
func TestLoadKeepsBuckets(t *testing.T) {
	r := startRLS(t, Options{}, perUser)
	r.admits(t, 10, "api", desc("user", "a"))
	r.admits(t, 5, "api", desc("tenant", "t"))
	d, err := ParseDomain("new.yaml", []byte(strings.Replace(perUser, "requests_per_unit: 15", "requests_per_unit: 30", 1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := NewConfig(d)
	if err := r.srv.Load(cfg); err != nil {
		t.Fatal(err)
	}
	if resp := r.ask(t, "api", desc("user", "a")); resp.OverallCode != over {
		t.Errorf("the unchanged user limit's bucket was reset: %v", resp)
	}
	if got := r.ask(t, "api", desc("tenant", "t")).Statuses[0].LimitRemaining; got != 9 {
		t.Errorf("tenant bucket after 15→30: %d left, want 9 (10 held, kept, less this request)", got)
	}
	r.clock.advance(time.Second)
	if got := r.admits(t, 11, "api", desc("user", "a")); got != 10 {
		t.Errorf("a second later: %d admitted, want 10", got)
	}
	if got := r.admits(t, 31, "api", desc("tenant", "t")); got != 30 {
		t.Errorf("tenant a second later: %d admitted, want 30 (the new burst, refilled at 30 a second)", got)
	}
}

// Concurrent requests on one descriptor pair admit exactly the smaller
// burst at a frozen clock, and a denial takes nothing from the other.
func TestConcurrentExactAdmission(t *testing.T) {
	r := startRLS(t, Options{}, perUser)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20 {
				resp, err := r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "api",
					Descriptors: []*common.RateLimitDescriptor{desc("user", "a"), desc("tenant", "t")}})
				if err != nil {
					t.Error(err)
					return
				}
				if resp.OverallCode == ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 10 {
		t.Errorf("%d admitted, want the user burst, 10", admitted.Load())
	}
	if got := r.ask(t, "api", desc("tenant", "t")).Statuses[0].LimitRemaining; got != 4 {
		t.Errorf("tenant bucket holds %d after this request, want 15-10-1 = 4", got)
	}
}

// A request-carried limit's unit_multiplier stretches its unit: 2 every 2
// minutes refill one a minute, in buckets apart from 2 a minute's.
func TestLimitOverrideUnitMultiplier(t *testing.T) {
	r := startRLS(t, Options{}, perUser)
	withLimit := func(mult uint32) *common.RateLimitDescriptor {
		d := desc("user", "m")
		d.Limit = &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
		if mult > 0 {
			d.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
		}
		return d
	}
	if got := r.admits(t, 3, "api", withLimit(2)); got != 2 {
		t.Fatalf("2 every 2 minutes: %d admitted, want 2", got)
	}
	resp := r.ask(t, "api", withLimit(2))
	if l := resp.Statuses[0].CurrentLimit; l.GetUnitMultiplier().GetValue() != 2 || l.GetRequestsPerUnit() != 2 {
		t.Errorf("current_limit %v, want 2 per 2 minutes", l)
	}
	if got := r.admits(t, 2, "api", withLimit(0)); got != 2 {
		t.Errorf("2 a minute has buckets of its own: %d admitted, want 2", got)
	}
	r.clock.advance(59 * time.Second)
	if got := r.admits(t, 1, "api", withLimit(2)); got != 0 {
		t.Errorf("59 s later: %d admitted, want 0 (one a minute)", got)
	}
	r.clock.advance(2 * time.Second)
	if got := r.admits(t, 2, "api", withLimit(2)); got != 1 {
		t.Errorf("61 s later: %d admitted, want 1", got)
	}
	d := withLimit(1 << 20)
	_, err := r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{d}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "per 1048576 MINUTE") {
		t.Errorf("2 every 2^20 minutes (about two years to refill): %v, want InvalidArgument", err)
	}
}

// A flood of new descriptor values cannot grow the in-memory store past
// MaxKeys buckets per limit; the keys beyond it are still limited.
func TestKeyFloodIsBounded(t *testing.T) {
	r := startRLS(t, Options{MaxKeys: 100}, perUser)
	ctx := context.Background()
	for i := range 5000 {
		req := &pb.RateLimitRequest{Domain: "api", Descriptors: []*common.RateLimitDescriptor{desc("user", fmt.Sprint("flood-", i))}}
		if _, err := r.srv.ShouldRateLimit(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	st := r.srv.state.Load()
	for l, lim := range st.lims {
		if e, ok := lim.(*engine.Engine); ok && e.Stats().Live > 100 {
			t.Errorf("limit %s holds %d live buckets, above MaxKeys 100", l.Path, e.Stats().Live)
		}
	}
	if got := r.admits(t, 20, "api", desc("user", "late")); got > 10 {
		t.Errorf("a key past the bound admitted %d of 20, above the limit's burst of 10", got)
	}
}
