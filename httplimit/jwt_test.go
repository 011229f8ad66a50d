package httplimit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

const unverified = `reads a JWT claim, but no verifier is configured (Options.JWT), so any client could claim any value; configure verification, or set "insecure_unverified_jwt": true to accept unverified claims`

// Without a verifier, rules that read claims are refused, each key and match
// named; the opt-in or a verifier makes them valid.
func TestClaimRulesNeedAVerifier(t *testing.T) {
	rules, err := httplimit.ParseRules([]byte(exampleDoc))
	if err != nil {
		t.Fatal(err)
	}
	want := "httplimit: invalid rules:\n" +
		`  rule "enterprise" (rules[0]): match.jwt:plan: ` + unverified + "\n" +
		`  rule "tenant" (rules[2]): limit_keys[0]: ` + unverified
	_, err = httplimit.New(rules, httplimit.Options{})
	var ce *httplimit.ConfigError
	if !errors.As(err, &ce) || err.Error() != want {
		t.Fatalf("New without a verifier: %v\nwant %s", err, want)
	}
	if err := httplimit.Validate(rules, httplimit.Options{}); err == nil || err.Error() != want {
		t.Errorf("Validate without a verifier: %v, want the error of New", err)
	}
	per, err := httplimit.New([]httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: 1, Burst: 1}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer per.Close()
	if err := per.Reload(rules); err == nil || err.Error() != want {
		t.Errorf("Reload without a verifier: %v, want the error of New", err)
	}
	if got := per.Rules(); len(got) != 1 || got[0].Name != "per-ip" {
		t.Errorf("a refused reload changed the rules: %+v", got)
	}

	if err := httplimit.Validate(rules, httplimit.Options{JWT: newIssuer()}); err != nil {
		t.Errorf("Validate with a verifier: %v", err)
	}
	optIn, _ := httplimit.ParseRules([]byte(strings.ReplaceAll(exampleDoc, `"limit_keys"`, `"insecure_unverified_jwt":true,"limit_keys"`)))
	if err := httplimit.Validate(optIn, httplimit.Options{}); err != nil {
		t.Errorf("Validate of rules that opt in: %v", err)
	}
	for i, r := range optIn {
		if !r.InsecureUnverifiedJWT || r.UsesJWT() != (r.Name != "free") {
			t.Errorf("rules[%d] %q: InsecureUnverifiedJWT %v, UsesJWT %v", i, r.Name, r.InsecureUnverifiedJWT, r.UsesJWT())
		}
	}
}

func TestInsecureUnverifiedJWTMustBeABoolean(t *testing.T) {
	_, err := httplimit.ParseRules([]byte(`{"rules":[{"name":"a","limit_keys":["jwt:sub"],"algorithm_config":{"rps":1,"burst":1},"insecure_unverified_jwt":"yes"}]}`))
	want := `rule "a" (rules[0]): insecure_unverified_jwt: must be true or false, got a string`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ParseRules: %v, want %s", err, want)
	}
}

// A rejected token is no token: keys are "" and matches fail; every
// rejection is counted by the reason the verifier wraps.
func TestRejectedTokensCountAsNone(t *testing.T) {
	l, _, is := newVerifyingLimiter(t, exampleDoc)
	check := func(auth string) httplimit.Result {
		t.Helper()
		r := req("192.0.2.1:1", "/", "X-Api-Key", "k")
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return l.Check(r)
	}
	claims := map[string]any{"plan": "enterprise", "org_id": "acme"}
	rejected := []string{
		is.reject(jws(`{"alg":"ES256"}`, claims, "a"), fmt.Errorf("bad: %w", httplimit.ErrJWTMalformed)),
		forged(claims), // not issued: ErrJWTSignature
		is.reject(jws(`{"alg":"ES256"}`, claims, "b"), fmt.Errorf("old: %w", httplimit.ErrJWTExpired)),
		is.reject(jws(`{"alg":"ES256"}`, claims, "c"), fmt.Errorf("early: %w", httplimit.ErrJWTNotYetValid)),
		is.reject(jws(`{"alg":"ES256"}`, claims, "d"), fmt.Errorf("iss: %w", httplimit.ErrJWTClaims)),
		is.reject(jws(`{"alg":"ES256"}`, claims, "e"), errors.New("something else")),
		"Bearer " + strings.Repeat("x", 8<<10+1), // too long to verify: malformed
		"bearer " + jws(`{"alg":"none"}`, claims, ""),
	}
	for _, auth := range rejected {
		res := check(auth)
		if len(res.Policies) != 2 || res.Policies[0].Name != "free" || res.Policies[1].Key != "" {
			t.Errorf("%.40s...: policies %+v, want free and tenant under the empty key", auth, res.Policies)
		}
	}
	for _, auth := range []string{"", "Basic dXNlcjpwYXNz", "Bearer"} {
		check(auth) // no bearer token: nothing to count
	}
	want := httplimit.JWTStats{Malformed: 2, Signature: 2, Expired: 1, NotYetValid: 1, Claims: 1, Other: 1}
	if got := l.JWTStats(); got != want {
		t.Errorf("JWTStats = %+v, want %+v", got, want)
	}
	if res := check(is.token(claims)); res.Policies[0].Name != "enterprise" || res.Policies[1].Key != "acme" {
		t.Errorf("an issued token: policies %+v, want enterprise and tenant acme", res.Policies)
	}
}

// A token is verified at most once per request, and not at all when no rule
// that applies reads a claim: a match's claims are checked after its other
// entries.
func TestTokenVerifiedOnceAndOnlyWhenNeeded(t *testing.T) {
	l, _, is := newVerifyingLimiter(t, `{"rules":[
	  {"name":"pro","limit_keys":["jwt:sub","jwt:org"],"match":{"jwt:plan":"pro","path_prefix":"/api/"},"algorithm_config":{"rps":1,"burst":5}},
	  {"name":"org","limit_keys":["jwt:org"],"algorithm_config":{"rps":1,"burst":5}},
	  {"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":1,"burst":5}}]}`)
	auth := is.token(map[string]any{"sub": "ann", "org": "acme", "plan": "pro"})
	res := l.Check(req("192.0.2.1:1", "/api/x", "Authorization", auth))
	if got := is.calls.Load(); got != 1 || len(res.Policies) != 3 {
		t.Errorf("three rules, three claims: %d verifications and %d rules applied, want 1 and 3", got, len(res.Policies))
	}

	only, _, is2 := newVerifyingLimiter(t, `{"rules":[
	  {"name":"pro","limit_keys":["jwt:sub"],"match":{"jwt:plan":"pro","path_prefix":"/api/"},"algorithm_config":{"rps":1,"burst":5}},
	  {"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":1,"burst":5}}]}`)
	res = only.Check(req("192.0.2.1:1", "/static/x", "Authorization", is2.token(map[string]any{"sub": "ann", "plan": "pro"})))
	if got := is2.calls.Load(); got != 0 || len(res.Policies) != 1 {
		t.Errorf("a request no claim rule applies to: %d verifications and %d rules applied, want 0 and 1", got, len(res.Policies))
	}
}

// Claims compare as strings: a string as is, anything else as its compact
// JSON text, large numbers with every digit.
func TestClaimValues(t *testing.T) {
	doc := `{"rules":[{"name":"by-org","limit_keys":["jwt:org"],"algorithm_config":{"rps":1,"burst":5}},
	  {"name":"admin","limit_keys":["method"],"match":{"jwt:admin":"true"},"algorithm_config":{"rps":1,"burst":5}}]}`
	l, _, is := newVerifyingLimiter(t, doc)
	for _, tt := range []struct {
		org   any
		key   string
		admin any
	}{
		{"acme", "acme", true},
		{json.Number("123456789012345678901234567890"), "123456789012345678901234567890", "true"},
		{42, "42", false},
		{1.5, "1.5", nil},
		{map[string]any{"b": []any{true, "x<y"}, "a": 1}, `{"a":1,"b":[true,"x<y"]}`, 1},
		{nil, "", true},
	} {
		claims := map[string]any{"org": tt.org}
		if tt.admin != nil {
			claims["admin"] = tt.admin
		}
		res := l.Check(req("192.0.2.1:1", "/", "Authorization", is.token(claims)))
		if res.Policies[0].Key != tt.key {
			t.Errorf("org %#v: key %q, want %q", tt.org, res.Policies[0].Key, tt.key)
		}
		wantAdmin := tt.admin == true || tt.admin == "true"
		if got := len(res.Policies) == 2; got != wantAdmin {
			t.Errorf("admin %#v: admin rule applied %v, want %v", tt.admin, got, wantAdmin)
		}
	}
	// A verifier that decodes numbers as float64 loses digits, but still
	// compares them as JSON.
	f := verifierFunc(func(string) (httplimit.Claims, error) { return httplimit.Claims{"org": float64(42)}, nil })
	fl, _ := newLimiter(t, doc, httplimit.Options{JWT: f})
	if res := fl.Check(req("192.0.2.1:1", "/", "Authorization", "Bearer x.y.z")); res.Policies[0].Key != "42" {
		t.Errorf("float64 claim 42: key %q, want \"42\"", res.Policies[0].Key)
	}
}

type verifierFunc func(string) (httplimit.Claims, error)

func (f verifierFunc) VerifyJWT(token string) (httplimit.Claims, error) { return f(token) }

// On the opt-in path, claims are decoded like a verifier's: numbers keep
// their text.
func TestUnverifiedClaimsKeepDigits(t *testing.T) {
	l, _ := newLimiter(t, `{"rules":[{"name":"by-org","limit_keys":["jwt:org"],"algorithm_config":{"rps":1,"burst":5},"insecure_unverified_jwt":true}]}`, httplimit.Options{})
	r := req("192.0.2.1:1", "/")
	r.Header.Set("Authorization", "Bearer "+jws(`{"alg":"none"}`, map[string]any{"org": json.Number("123456789012345678901234567890")}, ""))
	if res := l.Check(r); res.Policies[0].Key != "123456789012345678901234567890" {
		t.Errorf("key %q", res.Policies[0].Key)
	}
	r.Header.Set("Authorization", "Bearer e30.bnVsbA.") // payload null
	if res := l.Check(r); res.Policies[0].Key != "" || l.JWTStats().Malformed != 1 {
		t.Errorf("null payload: key %q, stats %+v; want \"\" and one malformed", res.Policies[0].Key, l.JWTStats())
	}
}
