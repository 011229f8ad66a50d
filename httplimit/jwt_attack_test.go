package httplimit_test

import (
	"fmt"
	"testing"
	"time"
)

// The tiers and the tenant rule of cmd/faucet/rules.example.json.
const exampleDoc = `{"rules":[
  {"name":"enterprise","limit_keys":["header:x-api-key"],"algorithm_config":{"rps":1000,"burst":2000},
   "match":{"jwt:plan":"enterprise"}},
  {"name":"free","limit_keys":["header:x-api-key"],"algorithm_config":{"rps":10,"burst":20}},
  {"name":"tenant","limit_keys":["jwt:org_id"],"algorithm_config":{"tokens_per_second":200,"burst":400,
   "cost_source":"header:x-request-weight"}}]}`

// An unsigned token claiming the enterprise plan gets the free tier, and its
// tenant claim is ignored; a token the issuer signed gets what it claims.
func TestForgedPlanGetsTheFreeTier(t *testing.T) {
	l, _, is := newVerifyingLimiter(t, exampleDoc)
	w := serve(l, req("192.0.2.1:1", "/", "X-Api-Key", "k1", "Authorization", forged(map[string]any{"plan": "enterprise", "org_id": "acme"})))
	checkHeaders(t, "forged enterprise token", w, map[string]string{"RateLimit": `"free";r=19;t=0, "tenant";r=399;t=0`})
	w = serve(l, req("192.0.2.1:1", "/", "X-Api-Key", "k2", "Authorization", is.token(map[string]any{"plan": "enterprise", "org_id": "acme"})))
	checkHeaders(t, "issued enterprise token", w, map[string]string{"RateLimit": `"enterprise";r=1999;t=0, "tenant";r=399;t=0`})
}

// Forged tokens with a new org_id on every request, on one API key, are
// limited exactly as requests without a token: by the free tier's burst and
// refill, not one fresh tenant bucket per request.
func TestRotatingForgedOrgIDs(t *testing.T) {
	const n = 3000 // one every millisecond: 3 s
	run := func(auth func(i int) string) int {
		l, c, _ := newVerifyingLimiter(t, exampleDoc)
		admitted := 0
		for i := range n {
			h := []string{"X-Api-Key", "k1"}
			if a := auth(i); a != "" {
				h = append(h, "Authorization", a)
			}
			if serve(l, req("192.0.2.1:1", "/", h...)).Code == 200 {
				admitted++
			}
			c.Add(time.Millisecond)
		}
		return admitted
	}
	rotating := run(func(i int) string {
		return forged(map[string]any{"plan": "enterprise", "org_id": fmt.Sprintf("org-%d", i)})
	})
	none := run(func(int) string { return "" })
	// The free tier: a burst of 20 and 10/s over 3 s.
	if rotating != none || rotating > 20+10*3 {
		t.Errorf("forged tokens with rotating org_id: %d of %d admitted; without a token %d; want the same, at most 50", rotating, n, none)
	}
}

// Forged tokens naming another tenant spend nothing of that tenant's bucket.
func TestForgedOrgIDCannotDrainAnotherTenant(t *testing.T) {
	l, _, is := newVerifyingLimiter(t, exampleDoc)
	for i := range 500 {
		// A new API key each time, so that no API-key bucket stops them.
		serve(l, req("192.0.2.66:1", "/", "X-Api-Key", fmt.Sprintf("attacker-%d", i), "Authorization", forged(map[string]any{"org_id": "acme"})))
	}
	w := serve(l, req("192.0.2.1:1", "/", "X-Api-Key", "acme-key", "Authorization", is.token(map[string]any{"plan": "enterprise", "org_id": "acme"})))
	if w.Code != 200 {
		t.Fatalf("acme's own request after 500 forged ones: %d, want 200", w.Code)
	}
	checkHeaders(t, "acme's own request", w, map[string]string{"RateLimit": `"enterprise";r=1999;t=0, "tenant";r=399;t=0`})
}
