package jwtverify_test

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/jwtverify"
	"github.com/golang-jwt/jwt/v5"
)

// The example rules' tiers and tenants on real tokens: a signed token gets
// what it claims; forged, confused and expired ones get the free tier and
// the empty tenant, and are counted by reason.
func TestWithHTTPLimit(t *testing.T) {
	rs, es := rsaSigner(t, "rsa"), ecSigner(t, "ec")
	v, _ := fileVerifier(t, jwtverify.Config{}, rs, es)
	rules, err := httplimit.ParseRules([]byte(`{"rules":[
	  {"name":"enterprise","limit_keys":["header:x-api-key"],"algorithm_config":{"rps":1000,"burst":2000},"match":{"jwt:plan":"enterprise"}},
	  {"name":"free","limit_keys":["header:x-api-key"],"algorithm_config":{"rps":10,"burst":20}},
	  {"name":"tenant","limit_keys":["jwt:org_id"],"algorithm_config":{"rps":200,"burst":400}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := httplimit.New(rules, httplimit.Options{JWT: v})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	enterprise := jwt.MapClaims{"plan": "enterprise", "org_id": "acme"}
	for _, tt := range []struct {
		name, token, tier, tenant string
	}{
		{"signed", es.sign(t, claims(enterprise)), "enterprise", "acme"},
		{"alg none", signToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims(enterprise)), "free", ""},
		{"HS256 with the public key", signToken(t, jwt.SigningMethodHS256, pubPEM, "rsa", claims(enterprise)), "free", ""},
		{"expired", es.sign(t, claims(jwt.MapClaims{"plan": "enterprise", "org_id": "acme", "exp": now.Add(-time.Hour).Unix()})), "free", ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Api-Key", "k")
		r.Header.Set("Authorization", "Bearer "+tt.token)
		res := lim.Check(r)
		if len(res.Policies) != 2 || res.Policies[0].Name != tt.tier || res.Policies[1].Key != tt.tenant {
			t.Errorf("%s: policies %+v, want %s and tenant %q", tt.name, res.Policies, tt.tier, tt.tenant)
		}
	}
	if got, want := lim.JWTStats(), (httplimit.JWTStats{Signature: 2, Expired: 1}); got != want {
		t.Errorf("JWTStats %+v, want %+v", got, want)
	}
}

// A verifier for HS256 tokens in front of two tiers: the issuer's token gets
// the enterprise tier, a token anyone could write gets the free one.
func Example() {
	secret := []byte("a secret of at least 32 bytes, never on a command line")
	v, err := jwtverify.New(jwtverify.Config{Secret: secret, Issuer: "https://auth.example"})
	if err != nil {
		panic(err) // names every bad field
	}
	defer v.Close()
	rules, err := httplimit.ParseRules([]byte(`{"rules":[
	  {"name":"enterprise","limit_keys":["header:x-api-key"],"algorithm_config":{"rps":1000,"burst":2000},"match":{"jwt:plan":"enterprise"}},
	  {"name":"free","limit_keys":["header:x-api-key"],"algorithm_config":{"rps":10,"burst":20}}]}`))
	if err != nil {
		panic(err)
	}
	lim, err := httplimit.New(rules, httplimit.Options{JWT: v})
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	claims := jwt.MapClaims{"plan": "enterprise", "iss": "https://auth.example", "exp": time.Now().Add(time.Hour).Unix()}
	signed, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for _, token := range []string{signed, forged} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Api-Key", "k1")
		r.Header.Set("Authorization", "Bearer "+token)
		res := lim.Check(r)
		h := http.Header{}
		res.WriteHeaders(h)
		fmt.Println(h.Get("RateLimit"))
	}
	fmt.Printf("%+v\n", lim.JWTStats())
	// Output:
	// "enterprise";r=1999;t=0
	// "free";r=19;t=0
	// {Malformed:0 Signature:1 Expired:0 NotYetValid:0 Claims:0 Other:0}
}
