package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/faucetgo/faucet/cmd/internal/logtest"
)

// jwtKey is an ES256 key of the tests' issuer.
type jwtKey struct {
	kid  string
	priv *ecdsa.PrivateKey
}

func newJWTKey(t *testing.T, kid string) jwtKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jwtKey{kid, k}
}

// token is a token the issuer signed with claims, valid for an hour.
func (k jwtKey) token(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"iss": "https://issuer.test", "aud": "api", "exp": time.Now().Add(time.Hour).Unix()}
	for n, v := range claims {
		c[n] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeKeySet writes the JSON Web Key Set of keys' public halves to path.
func writeKeySet(t *testing.T, path string, keys ...jwtKey) {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, k := range keys {
		j, err := jwkset.NewJWKFromKey(&k.priv.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: jwkset.AlgES256}})
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	doc, _ := json.Marshal(set)
	writeRules(t, path, string(doc))
}

// The example rules on verified tokens: a signed token gets its tier, a
// forged one the free tier, counted in /metrics; a key added to the key set
// file is trusted without a restart.
func TestServeJWTEndToEnd(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("upstream")) }))
	defer upstream.Close()
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	k1, k2 := newJWTKey(t, "k1"), newJWTKey(t, "k2")
	writeKeySet(t, jwks, k1)
	p := startServe(t, "--rules", "rules.example.json", "--upstream", upstream.URL, "--jwt-jwks-file", jwks,
		"--jwt-issuer", "https://issuer.test", "--jwt-audience", "api", "--jwt-jwks-refresh", "100ms")
	send := func(apiKey, token string) string {
		t.Helper()
		resp, body := get(t, p.url("/v1/items"), "X-Api-Key", apiKey, "Authorization", "Bearer "+token)
		if resp.StatusCode != 200 || body != "upstream" {
			t.Fatalf("%s: %d %q", apiKey, resp.StatusCode, body)
		}
		return resp.Header.Get("RateLimit")
	}
	enterprise := jwt.MapClaims{"plan": "enterprise", "org_id": "acme"}
	if got := send("k-signed", k1.token(t, enterprise)); !strings.HasPrefix(got, `"enterprise";r=1999;t=0, "tenant";r=399;t=0`) {
		t.Errorf("signed enterprise token: RateLimit %q, want the enterprise tier and tenant acme", got)
	}
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodNone, enterprise).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if got := send("k-forged", forged); !strings.HasPrefix(got, `"free";r=19;t=0, "tenant";r=399;t=0`) {
		t.Errorf("forged enterprise token: RateLimit %q, want the free tier", got)
	}
	if got := send("k-unknown", k2.token(t, enterprise)); !strings.HasPrefix(got, `"free";r=19;t=0`) {
		t.Errorf("a key not yet in the set: RateLimit %q, want the free tier", got)
	}
	_, metrics := get(t, p.adminURL("/metrics"))
	for _, want := range []string{`faucet_jwt_rejected_total{reason="signature"} 2`, `faucet_jwt_rejected_total{reason="expired"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, logtest.Grep(metrics, "faucet_jwt"))
		}
	}

	writeKeySet(t, jwks, k1, k2)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; !strings.HasPrefix(send("k-rotated-"+string(rune('a'+i%26)), k2.token(t, enterprise)), `"enterprise"`); i++ {
		if time.Now().After(deadline) {
			t.Fatal("after 10 s, a key added to the key set file is still not trusted")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Without verification, rules that read claims are refused by --validate,
// each key and match named; the secret in the environment makes them
// valid; an opt-in rule is valid and warned about.
func TestServeJWTValidate(t *testing.T) {
	t.Setenv(jwtSecretEnv, "")
	os.Unsetenv(jwtSecretEnv)
	code, out, errs := runArgs("serve", "--rules", "rules.example.json", "--validate")
	if code != 2 || out != "" || !strings.Contains(errs, `rule "enterprise" (rules[0]): match.jwt:plan: reads a JWT claim, but no verifier is configured`) ||
		!strings.Contains(errs, `rule "tenant" (rules[2]): limit_keys[0]: reads a JWT claim`) ||
		!strings.Contains(errs, "verify tokens with --jwt-jwks-file, --jwt-jwks-url or "+jwtSecretEnv) {
		t.Errorf("no verification: exit %d %q\n%s", code, out, errs)
	}

	t.Setenv(jwtSecretEnv, "an HS256 secret of at least 32 bytes, for tests")
	if code, out, errs := runArgs("serve", "--rules", "rules.example.json", "--validate"); code != 0 || out != "rules.example.json: 4 rules, valid\n" || errs != "" {
		t.Errorf("with %s: exit %d %q %q", jwtSecretEnv, code, out, errs)
	}

	os.Unsetenv(jwtSecretEnv)
	optIn := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, optIn, `{"rules":[{"name":"by-org","limit_keys":["jwt:org_id"],"algorithm_config":{"rps":1,"burst":2},"insecure_unverified_jwt":true}]}`)
	code, out, errs = runArgs("serve", "--rules", optIn, "--validate")
	if code != 0 || !strings.Contains(out, "1 rules, valid") ||
		!regexp.MustCompile(`level=WARN msg="rule reads JWT claims WITHOUT verification.*" rule=by-org`).MatchString(errs) {
		t.Errorf("opt-in: exit %d %q %q", code, out, errs)
	}
}

// Every bad JWT setting is reported at once, with the flag or variable that
// gave it and what is allowed.
func TestServeJWTBadFlags(t *testing.T) {
	t.Setenv(jwtSecretEnv, "short")
	code, _, errs := runArgs("serve", "--validate", "--jwt-jwks-url", "http://idp.test/jwks", "--jwt-leeway", "10m",
		"--jwt-algorithms", "HS256,none", "--jwt-jwks-refresh", "1ms")
	for _, want := range []string{
		jwtSecretEnv + ": must be at least 32 bytes, the size of HS256's hash (RFC 7518, section 3.2), got 5",
		`--jwt-jwks-url: must be an https:// URL (http:// only to a loopback address), got "http://idp.test/jwks"`,
		`--jwt-algorithms: "none" is never accepted`,
		"--jwt-leeway: must be between 0 (the default, 30s) and 5m0s, got 10m0s",
		"--jwt-jwks-refresh: must be between 100ms and 24h0m0s",
	} {
		if code != 2 || !strings.Contains(errs, want) {
			t.Errorf("exit %d, output lacks %q:\n%s", code, want, errs)
		}
	}
	os.Unsetenv(jwtSecretEnv)
	code, _, errs = runArgs("serve", "--validate", "--jwt-issuer", "https://issuer.test")
	if code != 2 || !strings.Contains(errs, "--jwt-issuer, --jwt-audience, --jwt-leeway, --jwt-algorithms, --jwt-jwks-refresh, --jwt-exp-optional: only mean something with") {
		t.Errorf("--jwt-issuer alone: exit %d %s", code, errs)
	}
	code, _, errs = runArgs("serve", "--validate", "--jwt-jwks-file", filepath.Join(t.TempDir(), "missing.json"))
	if code != 2 || !strings.Contains(errs, "--jwt-jwks-file: open ") {
		t.Errorf("missing key set file: exit %d %s", code, errs)
	}
}
