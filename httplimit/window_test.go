package httplimit_test

import (
	"errors"
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
