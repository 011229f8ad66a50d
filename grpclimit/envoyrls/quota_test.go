package envoyrls

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/faucetgo/faucet/engine"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const monthly = `
domain: billing
descriptors:
  - key: tenant
    rate_limit:
      unit: month
      requests_per_unit: 100
      calendar: {}
  - key: plan
    rate_limit: {unit: month, requests_per_unit: 100}
`

// startAt is startRLS on a virtual clock at t.
func startAt(t *testing.T, at time.Time, opts Options, srcs ...string) *rls {
	t.Helper()
	r := startRLS(t, opts, srcs...)
	r.clock.mu.Lock()
	r.clock.t = at
	r.clock.mu.Unlock()
	return r
}

// A monthly calendar quota admits its requests_per_unit in the calendar
// month, denies the next with duration_until_reset at the 1st of the next
// month, and renews all at once then; the token bucket beside it (no
// calendar) refills continuously, as before.
func TestCalendarQuotaMonthly(t *testing.T) {
	now := time.Date(2023, time.November, 14, 22, 13, 20, 0, time.UTC)
	renewal := time.Date(2023, time.December, 1, 0, 0, 0, 0, time.UTC)
	r := startAt(t, now, Options{}, monthly)
	st := r.ask(t, "billing", desc("tenant", "a")).Statuses[0]
	if st.Code != ok || st.LimitRemaining != 99 || st.DurationUntilReset.AsDuration() != renewal.Sub(now) {
		t.Errorf("first request: %v, want OK, 99 left, reset in %v", st, renewal.Sub(now))
	}
	if l := st.CurrentLimit; l.GetRequestsPerUnit() != 100 || l.GetUnit() != pb.RateLimitResponse_RateLimit_MONTH {
		t.Errorf("current_limit %v, want 100 per MONTH", l)
	}
	if got := r.admits(t, 100, "billing", desc("tenant", "a")); got != 99 {
		t.Fatalf("%d of the next 100 admitted, want 99", got)
	}
	resp := r.ask(t, "billing", desc("tenant", "a"))
	st = resp.Statuses[0]
	if resp.OverallCode != over || st.Code != over || st.LimitRemaining != 0 || st.DurationUntilReset.AsDuration() != renewal.Sub(now) {
		t.Errorf("request 102: %v, want OVER_LIMIT, 0 left, reset in %v", resp, renewal.Sub(now))
	}
	// Ten days on, a bucket of 100 a 30-day month has a third back; the
	// quota has nothing until the 1st.
	r.admits(t, 100, "billing", desc("plan", "p"))
	r.clock.advance(10 * 24 * time.Hour)
	if got := r.admits(t, 40, "billing", desc("plan", "p")); got != 33 {
		t.Errorf("the bucket after 10 days: %d admitted, want 33", got)
	}
	if got := r.admits(t, 1, "billing", desc("tenant", "a")); got != 0 {
		t.Errorf("the quota after 10 days: %d admitted, want 0", got)
	}
	r.clock.advance(renewal.Sub(r.clock.now()) - time.Second)
	st = r.ask(t, "billing", desc("tenant", "a")).Statuses[0]
	if st.Code != over || st.DurationUntilReset.AsDuration() != time.Second {
		t.Errorf("a second before the 1st: %v, want OVER_LIMIT, reset in 1s", st)
	}
	r.clock.advance(time.Second)
	if got := r.admits(t, 101, "billing", desc("tenant", "a")); got != 100 {
		t.Errorf("on the 1st: %d of 101 admitted, want 100", got)
	}
	st = r.ask(t, "billing", desc("tenant", "a")).Statuses[0]
	if next := time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC); st.DurationUntilReset.AsDuration() != next.Sub(renewal) {
		t.Errorf("December's reset in %v, want %v (31 days)", st.DurationUntilReset.AsDuration(), next.Sub(renewal))
	}
}

// The quota of the format's example renews on the 15th at midnight in
// Berlin: on the evening of the 14th UTC, not a month later.
func TestCalendarQuotaTimeZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cfg := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: month\n      requests_per_unit: 5\n      calendar: {time_zone: Europe/Berlin, day: 15, hour: 0}\n"
	now := time.Date(2023, time.November, 14, 22, 13, 20, 0, time.UTC) // 23:13:20 in Berlin
	renewal := time.Date(2023, time.November, 15, 0, 0, 0, 0, berlin)
	r := startAt(t, now, Options{}, cfg)
	if got := r.admits(t, 6, "d", desc("k", "v")); got != 5 {
		t.Fatalf("%d of 6 admitted, want 5", got)
	}
	st := r.ask(t, "d", desc("k", "v")).Statuses[0]
	if st.Code != over || st.DurationUntilReset.AsDuration() != renewal.Sub(now) || renewal.Sub(now) != 46*time.Minute+40*time.Second {
		t.Errorf("%v, want OVER_LIMIT, reset in %v (46m40s)", st, renewal.Sub(now))
	}
	r.clock.advance(renewal.Sub(now))
	if got := r.admits(t, 6, "d", desc("k", "v")); got != 5 {
		t.Errorf("at midnight in Berlin: %d of 6 admitted, want 5", got)
	}

	// A day that daylight saving shortens to 23 hours renews after 23.
	daily := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n      requests_per_unit: 1\n      calendar: {time_zone: Europe/Berlin}\n"
	start := time.Date(2024, time.March, 31, 0, 0, 0, 0, berlin)
	r = startAt(t, start, Options{}, daily)
	st = r.ask(t, "d", desc("k", "v")).Statuses[0]
	if st.Code != ok || st.DurationUntilReset.AsDuration() != 23*time.Hour {
		t.Errorf("on 31 March 2024 in Berlin: %v, want OK, reset in 23h", st)
	}
}

// A look (hits_addend 0) at a spent quota is OVER_LIMIT until the renewal;
// a cost above the quota never passes, and has no reset; neither takes.
func TestCalendarQuotaLooksAndHugeCosts(t *testing.T) {
	now := time.Date(2023, time.November, 14, 22, 13, 20, 0, time.UTC)
	renewal := time.Date(2023, time.December, 1, 0, 0, 0, 0, time.UTC)
	r := startAt(t, now, Options{}, monthly)
	look := desc("tenant", "l")
	look.HitsAddend = wrapperspb.UInt64(0)
	if st := r.ask(t, "billing", look).Statuses[0]; st.Code != ok || st.LimitRemaining != 100 || st.DurationUntilReset.AsDuration() != renewal.Sub(now) {
		t.Errorf("a look at a fresh quota: %v, want OK, 100 left, reset at the renewal", st)
	}
	huge := desc("tenant", "l")
	huge.HitsAddend = wrapperspb.UInt64(101)
	if st := r.ask(t, "billing", huge).Statuses[0]; st.Code != over || st.DurationUntilReset != nil {
		t.Errorf("a cost of 101: %v, want OVER_LIMIT without a reset", st)
	}
	r.admits(t, 100, "billing", desc("tenant", "l"))
	if st := r.ask(t, "billing", look).Statuses[0]; st.Code != over || st.DurationUntilReset.AsDuration() != renewal.Sub(now) {
		t.Errorf("a look at a spent quota: %v, want OVER_LIMIT, reset at the renewal", st)
	}
}

// headerMap is the header fields of an answer.
func headerMap(resp *pb.RateLimitResponse) map[string]string {
	h := map[string]string{}
	for _, v := range resp.ResponseHeadersToAdd {
		h[v.Key] = v.Value
	}
	return h
}

// The RateLimit fields of a quota say what its status says: w the month's
// nominal 30 days, t the renewal once the quota is spent, and a denial's
// reason quota_exceeded, with a Retry-After at the renewal plus at most
// five minutes of jitter.
func TestCalendarQuotaHeaders(t *testing.T) {
	now := time.Date(2023, time.November, 14, 22, 13, 20, 0, time.UTC)
	wait := int64(time.Date(2023, time.December, 1, 0, 0, 0, 0, time.UTC).Sub(now) / time.Second)
	r := startAt(t, now, Options{Headers: true}, monthly)
	h := headerMap(r.ask(t, "billing", desc("tenant", "a")))
	if want := `"billing.tenant";q=100;w=2592000`; h["Ratelimit-Policy"] != want {
		t.Errorf("RateLimit-Policy %q, want %q", h["Ratelimit-Policy"], want)
	}
	if want := `"billing.tenant";r=99;t=0`; h["Ratelimit"] != want {
		t.Errorf("RateLimit %q, want %q", h["Ratelimit"], want)
	}
	r.admits(t, 98, "billing", desc("tenant", "a"))
	h = headerMap(r.ask(t, "billing", desc("tenant", "a")))
	if want := fmt.Sprintf(`"billing.tenant";r=0;t=%d`, wait); h["Ratelimit"] != want {
		t.Errorf("the last request's RateLimit %q, want %q (the same cost passes at the renewal)", h["Ratelimit"], want)
	}
	h = headerMap(r.ask(t, "billing", desc("tenant", "a")))
	if want := fmt.Sprintf(`"billing.tenant";r=0;t=%d`, wait); h["Ratelimit"] != want {
		t.Errorf("a denial's RateLimit %q, want %q", h["Ratelimit"], want)
	}
	if h["X-Faucet-Reason"] != "quota_exceeded" {
		t.Errorf("reason %q, want quota_exceeded", h["X-Faucet-Reason"])
	}
	if ra, err := strconv.ParseInt(h["Retry-After"], 10, 64); err != nil || ra < wait || ra > wait+300 {
		t.Errorf("Retry-After %q, want %d to %d", h["Retry-After"], wait, wait+300)
	}
}

// A shadow_mode quota denies nothing and still counts; a request-carried
// limit on its descriptor is a token bucket apart, and takes nothing from
// the quota.
func TestCalendarQuotaShadowAndOverride(t *testing.T) {
	cfg := `
domain: s
descriptors:
  - key: tenant
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 2, calendar: {}}
  - key: user
    rate_limit: {unit: week, requests_per_unit: 2, calendar: {weekday: monday}}
`
	r := startAt(t, time.Date(2024, time.May, 1, 12, 0, 0, 0, time.UTC), Options{}, cfg)
	if got := r.admits(t, 3, "s", desc("tenant", "t")); got != 3 {
		t.Errorf("shadow quota: %d of 3 admitted, want 3", got)
	}
	st := r.ask(t, "s", desc("tenant", "t")).Statuses[0]
	if st.Code != ok || st.LimitRemaining != 0 || st.DurationUntilReset.AsDuration() != 12*time.Hour {
		t.Errorf("spent shadow quota: %v, want OK, 0 left, reset in 12h", st)
	}
	if s := statOf(t, r, "s.tenant"); s.ShadowMode != 2 {
		t.Errorf("shadow denials %d, want 2", s.ShadowMode)
	}
	carried := desc("user", "u")
	carried.Limit = &common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE}
	if got := r.admits(t, 2, "s", carried); got != 1 {
		t.Errorf("carried limit of 1 a minute: %d of 2 admitted, want 1", got)
	}
	r.clock.advance(61 * time.Second)
	if got := r.admits(t, 1, "s", carried); got != 1 {
		t.Errorf("61 s later, the carried bucket refilled: %d admitted, want 1", got)
	}
	// Wednesday noon: the week began on Monday, renews next Monday.
	st = r.ask(t, "s", desc("user", "u")).Statuses[0]
	if st.Code != ok || st.LimitRemaining != 1 || st.DurationUntilReset.AsDuration() != 5*24*time.Hour-12*time.Hour-61*time.Second {
		t.Errorf("the weekly quota beside the carried limit: %v, want OK, 1 left (nothing taken by it), reset on Monday", st)
	}
}

// refusingStore keeps token buckets in memory and refuses calendar
// quotas, as a shared store without them does.
func refusingStore() *engine.Pool {
	mem := engine.NewEnginePool(engine.Config{})
	return engine.NewPool(func(s engine.Spec) (engine.Limiter, error) {
		if s.Calendar != nil {
			return nil, errors.New("this store keeps no calendar quotas")
		}
		return mem.Bind(s)
	})
}

// A store that refuses calendar quotas fails the load, naming the file,
// the limit and its reason; a configuration without one loads on it.
func TestCalendarQuotaStoreRefuses(t *testing.T) {
	// The bucket first: bound, then released when the quota fails.
	bucketFirst := "domain: billing\ndescriptors:\n  - {key: plan, rate_limit: {unit: month, requests_per_unit: 100}}\n" +
		"  - {key: tenant, rate_limit: {unit: month, requests_per_unit: 100, calendar: {}}}\n"
	d, err := ParseDomain("billing.yaml", []byte(bucketFirst))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := NewConfig(d)
	store := refusingStore()
	_, err = New(cfg, Options{Store: store})
	if err == nil || !strings.Contains(err.Error(), "billing.yaml: limit billing.tenant") || !strings.Contains(err.Error(), "this store keeps no calendar quotas") {
		t.Fatalf("err %v, want the file, the limit and the store's reason", err)
	}
	if store.Len() != 0 {
		t.Errorf("%d limiters left bound after the failed load, want 0", store.Len())
	}
	r := startRLS(t, Options{Store: refusingStore()}, perUser)
	if got := r.admits(t, 11, "api", desc("user", "a")); got != 10 {
		t.Errorf("token buckets on the store: %d of 11 admitted, want 10", got)
	}
}

// A reload that changes a quota keeps what each key took in its period;
// one that turns a bucket into a quota starts it afresh.
func TestCalendarQuotaReload(t *testing.T) {
	r := startAt(t, time.Date(2023, time.November, 14, 22, 13, 20, 0, time.UTC), Options{}, monthly)
	r.admits(t, 60, "billing", desc("tenant", "a"))
	r.admits(t, 100, "billing", desc("plan", "p"))
	next := strings.Replace(monthly, "requests_per_unit: 100\n      calendar: {}", "requests_per_unit: 80\n      calendar: {}", 1)
	next = strings.Replace(next, "{unit: month, requests_per_unit: 100}", "{unit: month, requests_per_unit: 100, calendar: {}}", 1)
	d, err := ParseDomain("billing.yaml", []byte(next))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := NewConfig(d)
	if err := r.srv.Load(cfg); err != nil {
		t.Fatal(err)
	}
	if got := r.admits(t, 30, "billing", desc("tenant", "a")); got != 20 {
		t.Errorf("quota 100→80 with 60 taken: %d of 30 admitted, want 20", got)
	}
	if got := r.admits(t, 101, "billing", desc("plan", "p")); got != 100 {
		t.Errorf("a spent bucket turned quota: %d of 101 admitted, want 100", got)
	}
}
