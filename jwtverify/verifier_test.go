package jwtverify_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/jwtverify"
	"github.com/golang-jwt/jwt/v5"
)

var secret = []byte("an HS256 secret of at least 32 bytes, for tests")

// Every algorithm verifies with its key, and the claims come back with
// numbers as json.Number, every digit kept.
func TestEveryAlgorithmVerifies(t *testing.T) {
	rs, es, ed := rsaSigner(t, "rsa"), ecSigner(t, "ec"), edSigner(t, "ed")
	v, _ := fileVerifier(t, jwtverify.Config{Secret: secret}, rs, es, ed)
	optional, _ := fileVerifier(t, jwtverify.Config{ExpOptional: true}, rs)
	extra := jwt.MapClaims{"plan": "enterprise", "org_id": json.Number("123456789012345678901234567890")}
	for _, tt := range []struct {
		name  string
		v     *jwtverify.Verifier
		token string
	}{
		{"HS256", v, signToken(t, jwt.SigningMethodHS256, secret, "", claims(extra))},
		{"RS256", v, rs.sign(t, claims(extra))},
		{"ES256", v, es.sign(t, claims(extra))},
		{"EdDSA", v, ed.sign(t, claims(extra))},
		{"no kid: every key of the algorithm is tried", v, signer{"", es.method, es.priv}.sign(t, claims(extra))},
		{"exp passed, within the leeway", v, rs.sign(t, claims(jwt.MapClaims{"exp": now.Add(-29 * time.Second).Unix(), "plan": "enterprise", "org_id": extra["org_id"]}))},
		{"nbf ahead, within the leeway", v, rs.sign(t, claims(jwt.MapClaims{"nbf": now.Add(29 * time.Second).Unix(), "plan": "enterprise", "org_id": extra["org_id"]}))},
		{"aud a list holding ours", v, rs.sign(t, claims(jwt.MapClaims{"aud": []string{"other", "api"}, "plan": "enterprise", "org_id": extra["org_id"]}))},
		{"no exp, ExpOptional", optional, rs.sign(t, claims(jwt.MapClaims{"exp": nil, "plan": "enterprise", "org_id": extra["org_id"]}))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.v.VerifyJWT(tt.token)
			if err != nil {
				t.Fatalf("VerifyJWT: %v", err)
			}
			if c["plan"] != "enterprise" || c["org_id"] != json.Number("123456789012345678901234567890") {
				t.Errorf("claims %v", c)
			}
		})
	}
}

// Forged, misused and stale tokens are rejected, each for its reason.
func TestRejections(t *testing.T) {
	rs, es, ed := rsaSigner(t, "rsa"), ecSigner(t, "ec"), edSigner(t, "ed")
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weak := signer{"small", jwt.SigningMethodRS256, small}
	v, _ := fileVerifier(t, jwtverify.Config{Secret: secret}, rs, es, ed, weak)
	jwksOnly, _ := fileVerifier(t, jwtverify.Config{}, rs, es, ed)
	secretOnly := newVerifier(t, jwtverify.Config{Secret: secret})
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	other := newECSigner(t, "ec") // another issuer's key, under our key ID
	crit := jwt.NewWithClaims(jwt.SigningMethodES256, claims(nil))
	crit.Header["kid"], crit.Header["crit"] = "ec", []string{"exp"}
	critToken, err := crit.SignedString(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		v     *jwtverify.Verifier
		token string
		want  error
	}{
		{"alg none", v, signToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims(jwt.MapClaims{"plan": "enterprise"})), httplimit.ErrJWTSignature},
		{"another key under our key ID", v, other.sign(t, claims(nil)), httplimit.ErrJWTSignature},
		{"another key without a key ID", v, signer{"", other.method, other.priv}.sign(t, claims(nil)), httplimit.ErrJWTSignature},
		{"HS256 with the RSA public key as its secret, no secret configured", jwksOnly, signToken(t, jwt.SigningMethodHS256, pubPEM, "rsa", claims(nil)), httplimit.ErrJWTSignature},
		{"HS256 with the RSA public key as its secret", v, signToken(t, jwt.SigningMethodHS256, pubPEM, "rsa", claims(nil)), httplimit.ErrJWTSignature},
		{"HS256 with a wrong secret", secretOnly, signToken(t, jwt.SigningMethodHS256, []byte("another secret of at least 32 bytes....."), "", claims(nil)), httplimit.ErrJWTSignature},
		{"RS256 naming the EC key", v, signToken(t, jwt.SigningMethodRS256, rsaKey, "ec", claims(nil)), httplimit.ErrJWTSignature},
		{"ES256 naming the Ed25519 key", v, signToken(t, jwt.SigningMethodES256, ecKey, "ed", claims(nil)), httplimit.ErrJWTSignature},
		{"RS256 on a secret-only verifier", secretOnly, rs.sign(t, claims(nil)), httplimit.ErrJWTSignature},
		{"an RSA key under 2048 bits", v, weak.sign(t, claims(nil)), httplimit.ErrJWTSignature},
		{"RS384, not allowed", v, signToken(t, jwt.SigningMethodRS384, rsaKey, "rsa", claims(nil)), httplimit.ErrJWTSignature},
		{"unknown key ID", v, signer{"nope", es.method, es.priv}.sign(t, claims(nil)), httplimit.ErrJWTSignature},
		{"crit header", v, critToken, httplimit.ErrJWTSignature},
		{"exp passed beyond the leeway", v, rs.sign(t, claims(jwt.MapClaims{"exp": now.Add(-31 * time.Second).Unix()})), httplimit.ErrJWTExpired},
		{"nbf ahead beyond the leeway", v, rs.sign(t, claims(jwt.MapClaims{"nbf": now.Add(31 * time.Second).Unix()})), httplimit.ErrJWTNotYetValid},
		{"iat ahead beyond the leeway", v, rs.sign(t, claims(jwt.MapClaims{"iat": now.Add(31 * time.Second).Unix()})), httplimit.ErrJWTNotYetValid},
		{"no exp", v, rs.sign(t, claims(jwt.MapClaims{"exp": nil})), httplimit.ErrJWTClaims},
		{"exp not a number", v, rs.sign(t, claims(jwt.MapClaims{"exp": "tomorrow"})), httplimit.ErrJWTClaims},
		{"another issuer", v, rs.sign(t, claims(jwt.MapClaims{"iss": "https://evil.test"})), httplimit.ErrJWTClaims},
		{"no issuer", v, rs.sign(t, claims(jwt.MapClaims{"iss": nil})), httplimit.ErrJWTClaims},
		{"another audience", v, rs.sign(t, claims(jwt.MapClaims{"aud": "other"})), httplimit.ErrJWTClaims},
		{"not a JWS", v, "not-a-token", httplimit.ErrJWTMalformed},
		{"payload not base64url", v, "eyJhbGciOiJFUzI1NiJ9.!!!.c2ln", httplimit.ErrJWTMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.v.VerifyJWT(tt.token)
			if err == nil || c != nil {
				t.Fatalf("VerifyJWT accepted it: %v", c)
			}
			if got := reason(err); got != tt.want {
				t.Errorf("error %q wraps %v, want %v", err, got, tt.want)
			}
		})
	}
}

// Every bad field is reported at once, by name, with the allowed range.
func TestConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    jwtverify.Config
		want string
	}{
		{"no key", jwtverify.Config{}, "Secret: a key is required: Secret (HS256), JWKSFile or JWKSURL (RS256, ES256, EdDSA)"},
		{"short secret", jwtverify.Config{Secret: []byte("short")}, "Secret: must be at least 32 bytes, the size of HS256's hash (RFC 7518, section 3.2), got 5"},
		{"everything wrong", jwtverify.Config{Secret: secret, JWKSFile: "a.json", JWKSURL: "https://x/",
			Algorithms: []string{"HS256", "none", "PS256"}, Leeway: 10 * time.Minute, RefreshInterval: time.Millisecond,
			MinRefreshInterval: 2 * time.Hour, FetchTimeout: -1},
			`JWKSURL: give a key set file or a URL, not both; ` +
				`Algorithms: "none" is never accepted: it means no signature; ` +
				`Algorithms: unknown algorithm "PS256"; allowed: HS256, RS256, ES256, EdDSA; ` +
				`Leeway: must be between 0 (the default, 30s) and 5m0s, got 10m0s; ` +
				`RefreshInterval: must be between 100ms and 24h0m0s, or 0 for the default (2s), got 1ms; ` +
				`MinRefreshInterval: must be between 100ms and 1h0m0s, or 0 for the default (30s), got 2h0m0s; ` +
				`FetchTimeout: must be between 1ms and 1m0s, or 0 for the default (10s), got -1ns`},
		{"algorithms without their keys", jwtverify.Config{JWKSURL: "https://idp.test/jwks", Algorithms: []string{"HS256"}},
			"Algorithms: HS256 needs a secret"},
		{"algorithms without their keys", jwtverify.Config{Secret: secret, Algorithms: []string{"EdDSA"}},
			"Algorithms: EdDSA needs a key set"},
		{"plain http", jwtverify.Config{JWKSURL: "http://idp.test/jwks"},
			`JWKSURL: must be an https:// URL (http:// only to a loopback address), got "http://idp.test/jwks"`},
		{"no URL", jwtverify.Config{JWKSURL: "idp.test/jwks"},
			`JWKSURL: must be an https:// URL (http:// only to a loopback address), got "idp.test/jwks"`},
		{"missing file", jwtverify.Config{JWKSFile: "/nonexistent/jwks.json"},
			"JWKSFile: open /nonexistent/jwks.json: no such file or directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.c.Validate(); (err == nil) != (tt.name == "missing file") {
				t.Errorf("Validate: %v; it checks all but the key set itself", err)
			}
			v, err := jwtverify.New(tt.c)
			if err == nil {
				v.Close()
				t.Fatal("New accepted it")
			}
			if want := "jwtverify: invalid config: " + tt.want; err.Error() != want {
				t.Errorf("error\n%s\nwant\n%s", err, want)
			}
			var ce *jwtverify.ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Errorf("error %T is not a *ConfigError with problems", err)
			}
		})
	}
}
