package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// perSecondAndMonth is one rule per API key: 10 a second, and 5 a month
// renewed on the 1st at midnight in New York.
const perSecondAndMonth = `{"rules":[{"name":"api-key","limit_keys":["header:x-api-key"],"limits":[
	{"name":"api-key-second","rps":10,"burst":10},
	{"name":"api-key-month","algorithm":"calendar_quota","quota":5,"period":"month","time_zone":"America/New_York"}]}]}`

// quotaClock is a clock at t.
func quotaClock(t time.Time) *clock { return &clock{t: t} }

// A calendar quota denies once its period's quota is spent, until the
// exact renewal, whatever the token bucket beside it holds.
func TestQuotaLimit(t *testing.T) {
	c := quotaClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	l, _ := newLimiter(t, perSecondAndMonth, httplimit.Options{Now: c.Now})
	r := req("192.0.2.1:1", "/", "X-Api-Key", "k1")
	for i := range 5 {
		if res := l.Check(r); !res.Allowed {
			t.Fatalf("request %d: %+v", i, res)
		}
	}
	res := l.Check(r)
	renewal := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC) // midnight in New York
	wait := int64(renewal.Sub(c.Now()) / time.Second)
	if res.Allowed || res.DeniedBy != "api-key-month" || res.Reason != httplimit.ReasonQuotaExceeded {
		t.Fatalf("6th request: %+v, want denied by the month's quota", res)
	}
	month := policyOf(t, res, "api-key-month")
	if month.RetryIn != wait || month.Period != "month" || month.Window != 30*86400 || month.Quota != 5 {
		t.Errorf("month policy %+v, want t=%d to the renewal, period month, w=2592000, q=5", month, wait)
	}
	if res.RetryAfter < wait || res.RetryAfter > wait+300 {
		t.Errorf("Retry-After %d, want the renewal (%d s) plus at most 5 minutes", res.RetryAfter, wait)
	}
	if sec := policyOf(t, res, "api-key-second"); sec.Remaining != 5 {
		t.Errorf("the second's bucket holds %v, want 5: a denial by the quota takes nothing", sec.Remaining)
	}
	w := httptest.NewRecorder()
	l.Handler(okHandler).ServeHTTP(w, r)
	if got := w.Header().Get("RateLimit-Policy"); got != `"api-key-second";q=10;w=1, "api-key-month";q=5;w=2592000` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := w.Header().Get(httplimit.ReasonHeader); got != "quota_exceeded" {
		t.Errorf("reason %q", got)
	}
	if body := w.Body.String(); !strings.Contains(body, `Limit \"api-key-month\" of rule \"api-key\" allows 5 tokens per month`) {
		t.Errorf("problem %s", body)
	}
	c.Add(renewal.Sub(c.Now()) - time.Nanosecond)
	if res := l.Check(r); res.Allowed {
		t.Fatalf("a nanosecond before the renewal: %+v", res)
	}
	c.Add(time.Nanosecond)
	if res := l.Check(r); !res.Allowed || policyOf(t, res, "api-key-month").Remaining != 4 {
		t.Fatalf("at the renewal: %+v, want the month's quota back", res)
	}
}

// A key's own anchor and zone come from a verified claim, or a header a
// trusted proxy set; a client's header moves nothing.
func TestQuotaAnchorFrom(t *testing.T) {
	c := quotaClock(time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))
	doc := `{"rules":[{"name":"tenant","limit_keys":["header:x-tenant"],"insecure_unverified_jwt":true,"limits":[
		{"name":"tenant-month","quota":1,"period":"month",
		 "anchor_from":{"day":"jwt:billing_day","time_zone":"header:x-tenant-zone"}}]}]}`
	proxy := netip.MustParsePrefix("10.0.0.0/8")
	l, _ := newLimiter(t, doc, httplimit.Options{Now: c.Now, TrustedProxies: []netip.Prefix{proxy}})
	retryIn := func(r *http.Request) int64 {
		t.Helper()
		l.Check(r)
		res := l.Check(r)
		if res.Allowed {
			t.Fatalf("second request of a quota of 1 allowed: %+v", res)
		}
		return policyOf(t, res, "tenant-month").RetryIn
	}
	day := int64(86400)
	// Billing day 25 from the claim: renews on November 25th, 5 days on.
	r := req("192.0.2.1:1", "/", "X-Tenant", "a", "Authorization", bearer(map[string]any{"billing_day": 25}))
	if got := retryIn(r); got != 5*day-12*3600 {
		t.Errorf("billing day 25: renewal in %d s, want %d", got, 5*day-12*3600)
	}
	// No claim: the 1st of next month.
	if got := retryIn(req("192.0.2.1:1", "/", "X-Tenant", "b")); got != 11*day-12*3600 {
		t.Errorf("no claim: renewal in %d s, want December 1st", got)
	}
	// A claim out of range is ignored.
	if got := retryIn(req("192.0.2.1:1", "/", "X-Tenant", "c", "Authorization", bearer(map[string]any{"billing_day": 32}))); got != 11*day-12*3600 {
		t.Errorf("billing day 32: renewal in %d s, want December 1st", got)
	}
	// The zone from a trusted proxy's header: Tokyo's midnight of
	// December 1st is 15:00 UTC on November 30th.
	tokyo := req("10.1.2.3:1", "/", "X-Tenant", "d", "X-Tenant-Zone", "Asia/Tokyo")
	if got := retryIn(tokyo); got != 10*day+3*3600 {
		t.Errorf("zone from a trusted proxy: renewal in %d s, want %d", got, 10*day+3*3600)
	}
	// The same header from a client is not read.
	if got := retryIn(req("192.0.2.1:1", "/", "X-Tenant", "e", "X-Tenant-Zone", "Asia/Tokyo")); got != 11*day-12*3600 {
		t.Errorf("zone from a client: renewal in %d s, want UTC's December 1st", got)
	}
	// A tenant whose billing day changes keeps its period, used up.
	moved := req("192.0.2.1:1", "/", "X-Tenant", "a", "Authorization", bearer(map[string]any{"billing_day": 21}))
	if res := l.Check(moved); res.Allowed || policyOf(t, res, "tenant-month").RetryIn != 5*day-12*3600 {
		t.Errorf("billing day moved to the 21st: %+v, want the period in force, to the 25th", res)
	}
}

// A reload that changes a quota keeps what each key took.
func TestQuotaReloadKeepsUse(t *testing.T) {
	c := quotaClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	doc := func(n int) string {
		return `{"rules":[{"name":"k","limit_keys":["ip:address"],"limits":[{"name":"k-day","quota":` + strconv.Itoa(n) + `,"period":"day"}]}]}`
	}
	l, _ := newLimiter(t, doc(3), httplimit.Options{Now: c.Now})
	r := req("192.0.2.1:1", "/")
	l.Check(r)
	l.Check(r)
	rules, err := httplimit.ParseRules([]byte(doc(4)))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reload(rules); err != nil {
		t.Fatal(err)
	}
	if res := l.Check(r); !res.Allowed || policyOf(t, res, "k-day").Remaining != 1 {
		t.Fatalf("after raising the quota to 4: %+v, want 1 left (2 taken before)", res)
	}
}

// A Handler's check of a key in its period allocates nothing.
func TestQuotaHandlerAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop a quarter of what is put back")
	}
	c := quotaClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	l, _ := newLimiter(t, `{"rules":[{"name":"k","limit_keys":["ip:address"],"limits":[
		{"name":"k-second","rps":1e9,"burst":1e9},{"name":"k-month","quota":1e9,"period":"month","time_zone":"Europe/Berlin"}]}]}`,
		httplimit.Options{Now: c.Now})
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := req("192.0.2.1:1", "/")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if n := testing.AllocsPerRun(100, func() {
		clear(w.Header())
		h.ServeHTTP(w, r)
	}); n > 2 {
		// Both remaining counts change each time (the clock stands
		// still): the two RateLimit values are new text, as they are
		// for two token buckets; the quota adds nothing.
		t.Errorf("%v allocations per admitted request, want at most the 2 of new header values", n)
	}
	if w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
}

// Every bad quota is reported, naming the field.
func TestQuotaErrors(t *testing.T) {
	for _, tc := range []struct{ limit, field, problem string }{
		{`{"name":"a","quota":5}`, "limits[0].period", "required"},
		{`{"name":"a","period":"month"}`, "limits[0].quota", "required"},
		{`{"name":"a","quota":5,"period":"fortnight"}`, "limits[0].period", `"day", "week", "month" or "year"`},
		{`{"name":"a","quota":0,"period":"day"}`, "limits[0].quota", "between 0.001 and 1e9"},
		{`{"name":"a","quota":2e9,"period":"day"}`, "limits[0].quota", "between 0.001 and 1e9"},
		{`{"name":"a","quota":1.0001,"period":"day"}`, "limits[0].quota", "multiple of 0.001"},
		{`{"name":"a","quota":5,"period":"month","time_zone":"Mars/Olympus"}`, "limits[0].time_zone", "IANA zone name"},
		{`{"name":"a","quota":5,"period":"month","anchor":{"day":0}}`, "limits[0].anchor.day", ""},
		{`{"name":"a","quota":5,"period":"month","anchor":{"day":32}}`, "limits[0].anchor.day", "between 1 and 31"},
		{`{"name":"a","quota":5,"period":"month","anchor":{"hour":24}}`, "limits[0].anchor.hour", "between 0 and 23"},
		{`{"name":"a","quota":5,"period":"month","anchor":{"hour":1.5}}`, "limits[0].anchor.hour", "whole number"},
		{`{"name":"a","quota":5,"period":"day","anchor":{"day":3}}`, "limits[0].anchor.day", "only a monthly or yearly"},
		{`{"name":"a","quota":5,"period":"week","anchor":{"weekday":"caturday"}}`, "limits[0].anchor.weekday", `"monday" to "sunday"`},
		{`{"name":"a","quota":5,"period":"year","anchor":{"month":4,"day":31}}`, "limits[0].anchor.day", "at most 30"},
		{`{"name":"a","quota":5,"period":"month","anchor":{"minute":3}}`, "limits[0].anchor.minute", "unknown field"},
		{`{"name":"a","quota":5,"period":"month","rps":1}`, "limits[0].rps", "not a rate"},
		{`{"name":"a","quota":5,"period":"month","burst":1}`, "limits[0].burst", "not a burst"},
		{`{"name":"a","quota":5,"period":"month","anchor_from":{"day":"query:day"}}`, "limits[0].anchor_from.day", "the client cannot set"},
		{`{"name":"a","quota":5,"period":"week","anchor_from":{"day":"jwt:d"}}`, "limits[0].anchor_from.day", `only a "month" period`},
		{`{"name":"a","algorithm":"sliding","quota":5,"period":"week"}`, "limits[0].algorithm", `"token_bucket", "calendar_quota", "strict_window" or "concurrency"`},
	} {
		doc := `{"rules":[{"name":"r","limit_keys":["global"],"limits":[` + tc.limit + `]}]}`
		_, err := httplimit.ParseRules([]byte(doc))
		var ce *httplimit.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: got %v, want a ConfigError", tc.limit, err)
			continue
		}
		found := false
		for _, p := range ce.Problems {
			if p.Field == tc.field && strings.Contains(p.Problem, tc.problem) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s:\n got %v\nwant %s: ...%s...", tc.limit, err, tc.field, tc.problem)
		}
	}
	// Sources that would never be believed are refused by New.
	rules, err := httplimit.ParseRules([]byte(`{"rules":[{"name":"r","limit_keys":["global"],"limits":[
		{"name":"a","quota":5,"period":"month","anchor_from":{"day":"jwt:billing_day","time_zone":"header:x-zone"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	err = httplimit.Validate(rules, httplimit.Options{})
	for _, want := range []string{"limits[0].anchor_from.day: reads a JWT claim", "limits[0].anchor_from.time_zone: an anchor is read from a header only"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
}

// A quota keyed by client address keeps each client apart, however the
// check composes its keys.
func TestQuotaKeysAreCopies(t *testing.T) {
	c := quotaClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	l, _ := newLimiter(t, `{"rules":[{"name":"ip","limit_keys":["ip:address","method"],"limits":[
		{"name":"ip-day","quota":1,"period":"day"}]}]}`, httplimit.Options{Now: c.Now})
	h := l.Handler(okHandler)
	ips := []string{"192.0.2.1", "192.0.2.2", "198.51.100.77", "2001:db8::1"}
	for round, want := range []int{200, 429} {
		for _, ip := range ips {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req(netip.AddrPortFrom(netip.MustParseAddr(ip), 1).String(), "/"))
			if w.Code != want {
				t.Errorf("round %d, %s: %d, want %d", round, ip, w.Code, want)
			}
		}
	}
}
