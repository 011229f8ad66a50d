package httplimit_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// A strict window: at most 3 in any 24 hours, across midnight; its denial
// says when enough leaves the window.
func TestWindowLimit(t *testing.T) {
	c := quotaClock(time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC))
	l, _ := newLimiter(t, `{"rules":[{"name":"mail","limit_keys":["header:x-account"],"limits":[
		{"name":"mail-day","algorithm":"strict_window","limit":3,"window":"1d","slots":24}]}]}`, httplimit.Options{Now: c.Now})
	r := req("192.0.2.1:1", "/", "X-Account", "a")
	for i := range 3 {
		if res := l.Check(r); !res.Allowed {
			t.Fatalf("request %d: %+v", i, res)
		}
	}
	c.Add(2 * time.Minute) // past midnight
	res := l.Check(r)
	if res.Allowed || res.DeniedBy != "mail-day" || res.Reason != httplimit.ReasonWindowExceeded {
		t.Fatalf("past midnight: %+v, want denied by the window", res)
	}
	p := policyOf(t, res, "mail-day")
	wait := int64(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Sub(c.Now()) / time.Second)
	if p.Shape != httplimit.ShapeStrictWindow || p.Window != 86400 || p.Quota != 3 || p.RetryIn != wait {
		t.Errorf("policy %+v, want a strict window of 3 in 86400 s, t=%d", p, wait)
	}
	if res.RetryAfter < wait || res.RetryAfter > wait+300 {
		t.Errorf("Retry-After %d, want %d plus at most 5 minutes", res.RetryAfter, wait)
	}
	w := httptest.NewRecorder()
	l.Handler(okHandler).ServeHTTP(w, r)
	if !strings.Contains(w.Body.String(), `allows 3 tokens in any 86400 s`) || w.Header().Get(httplimit.ReasonHeader) != "window_exceeded" {
		t.Errorf("problem %s, reason %q", w.Body.String(), w.Header().Get(httplimit.ReasonHeader))
	}
	c.Add(time.Duration(wait) * time.Second)
	if res := l.Check(r); !res.Allowed {
		t.Errorf("at the retry: %+v", res)
	}
}

// Every bad window is reported, naming the field.
func TestWindowErrors(t *testing.T) {
	for _, tc := range []struct{ limit, field, problem string }{
		{`{"name":"a","window":"1d"}`, "limits[0].limit", "required"},
		{`{"name":"a","algorithm":"strict_window","limit":3}`, "limits[0].window", "required"},
		{`{"name":"a","limit":0,"window":"1d"}`, "limits[0].limit", "between 0.001 and 4e6"},
		{`{"name":"a","limit":5e6,"window":"1d"}`, "limits[0].limit", "between 0.001 and 4e6"},
		{`{"name":"a","limit":3,"window":"500ms"}`, "limits[0].window", "between 1s and 366 days"},
		{`{"name":"a","limit":3,"window":"367d"}`, "limits[0].window", `such as "90s"`},
		{`{"name":"a","limit":3,"window":"a fortnight"}`, "limits[0].window", `such as "90s", "24h" or "7d"`},
		{`{"name":"a","limit":3,"window":"1d","slots":65}`, "limits[0].slots", "between 1 and 64"},
		{`{"name":"a","limit":3,"window":"1d","slots":2.5}`, "limits[0].slots", "whole number"},
		{`{"name":"a","limit":3,"window":"1d","burst":3}`, "limits[0].burst", "not a burst"},
		{`{"name":"a","limit":3,"window":"1d","quota":3,"period":"day"}`, "limits[0].window", "not both"},
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
}

// A window keyed by client address keeps each client apart: the keys a
// check composes in reused memory are copied when the window keeps them.
func TestWindowKeysAreCopies(t *testing.T) {
	c := quotaClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	l, _ := newLimiter(t, `{"rules":[{"name":"ip","limit_keys":["ip:address"],"limits":[
		{"name":"ip-hour","limit":1,"window":"1h"}]}]}`, httplimit.Options{Now: c.Now})
	h := l.Handler(okHandler)
	for _, ip := range []string{"192.0.2.1", "192.0.2.2", "198.51.100.77"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req(ip+":1", "/"))
		if w.Code != 200 {
			t.Fatalf("first request of %s: %d", ip, w.Code)
		}
	}
	for _, ip := range []string{"192.0.2.1", "192.0.2.2", "198.51.100.77"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req(ip+":1", "/"))
		if w.Code != 429 {
			t.Errorf("second request of %s in the hour: %d, want 429", ip, w.Code)
		}
	}
}

// A memory budget per limit refuses a window whose keys could exceed it,
// saying by how much and what to lower.
func TestWindowMemoryBudget(t *testing.T) {
	rules, err := httplimit.ParseRules([]byte(`{"rules":[{"name":"ip","limit_keys":["ip:address"],"limits":[
		{"name":"ip-day","limit":100,"window":"1d","slots":64}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	store := httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxKeys: 1_000_000, MaxBytesPerLimit: 256 << 20})
	defer store.Close()
	_, err = httplimit.New(rules, httplimit.Options{Store: store})
	if err == nil || !strings.Contains(err.Error(), `"ip-day"`) || !strings.Contains(err.Error(), "1000000 keys of 425 bytes each are 405 MiB, above the 256 MiB") ||
		!strings.Contains(err.Error(), "lower its slots") {
		t.Fatalf("a window over budget: %v", err)
	}
	rules[0].Limits[0].Slots = 16
	l, err := httplimit.New(rules, httplimit.Options{Store: store})
	if err != nil {
		t.Fatalf("16 slots (185 MB): %v", err)
	}
	l.Close()
	unbounded := httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxBytesPerLimit: 256 << 20})
	defer unbounded.Close()
	if _, err := httplimit.New(rules, httplimit.Options{Store: unbounded}); err == nil || !strings.Contains(err.Error(), "unbounded") {
		t.Fatalf("unbounded keys under a budget: %v", err)
	}
}

// A flood of client addresses against a window keyed by address holds at
// most MaxKeys keys, and the addresses beyond them share one overflow
// window: the flood never switches the limit off.
func TestWindowKeyFlood(t *testing.T) {
	store := httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxKeys: 100, SweepInterval: -1})
	defer store.Close()
	c := quotaClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	l, _ := newLimiter(t, `{"rules":[{"name":"ip","limit_keys":["ip:address"],"limits":[
		{"name":"ip-hour","limit":5,"window":"1h"}]}]}`, httplimit.Options{Now: c.Now, Store: store})
	admitted := 0
	for i := range 5000 {
		ip := fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		if l.Check(req(ip, "/")).Allowed {
			admitted++
		}
	}
	st := l.Stats()[0]
	if st.Live > 100 || st.Overflow == 0 {
		t.Errorf("stats %+v: want at most 100 keys, the rest overflowing", st)
	}
	// 100 keys at 1 each, and 5 from the shared overflow window.
	if admitted != 105 {
		t.Errorf("admitted %d of 5000 new addresses, want 105", admitted)
	}
}
