package jwtverify_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/jwtverify"
	"github.com/golang-jwt/jwt/v5"
)

// now is the tests' clock: tokens are issued relative to it.
var now = time.Unix(1_700_000_000, 0)

func clock() time.Time { return now }

// signer is a key pair with its key ID and algorithm.
type signer struct {
	kid    string
	method jwt.SigningMethod
	priv   crypto.Signer
}

var (
	keysOnce sync.Once
	rsaKey   *rsa.PrivateKey
	ecKey    *ecdsa.PrivateKey
	edKey    ed25519.PrivateKey
)

// keys are generated once per test binary: RSA takes a while.
func genKeys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if _, edKey, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
	})
}

func rsaSigner(t testing.TB, kid string) signer {
	genKeys(t)
	return signer{kid, jwt.SigningMethodRS256, rsaKey}
}

func ecSigner(t testing.TB, kid string) signer {
	genKeys(t)
	return signer{kid, jwt.SigningMethodES256, ecKey}
}

func edSigner(t testing.TB, kid string) signer {
	genKeys(t)
	return signer{kid, jwt.SigningMethodEdDSA, edKey}
}

// newECSigner is a fresh P-256 key: another issuer's, or a rotated one.
func newECSigner(t testing.TB, kid string) signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid, jwt.SigningMethodES256, k}
}

// sign makes a token with claims; an empty kid leaves it out of the header.
func (s signer) sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	return signToken(t, s.method, s.priv, s.kid, claims)
}

// signToken signs claims with key by method, the key ID kid in the header
// unless it is empty.
func signToken(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	out, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keySet is the JSON Web Key Set of the signers' public keys, without "alg"
// (jwkset adds it for Ed25519), so that a key ID alone picks the key.
func keySet(t testing.TB, signers ...signer) []byte {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, s := range signers {
		k, err := jwkset.NewJWKFromKey(s.priv.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: s.kid}})
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, k.Marshal())
	}
	doc, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// writeFile replaces the file at path with doc, atomically.
func writeFile(t testing.TB, path string, doc []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// fileVerifier is a Verifier on a key set file of signers, on the tests'
// clock, for issuer "https://issuer.test" and audience "api".
func fileVerifier(t testing.TB, c jwtverify.Config, signers ...signer) (*jwtverify.Verifier, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, path, keySet(t, signers...))
	c.JWKSFile = path
	return newVerifier(t, c), path
}

func newVerifier(t testing.TB, c jwtverify.Config) *jwtverify.Verifier {
	t.Helper()
	if c.Now == nil {
		c.Now = clock
	}
	if c.Issuer == "" {
		c.Issuer = "https://issuer.test"
	}
	if c.Audience == "" {
		c.Audience = "api"
	}
	v, err := jwtverify.New(c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// claims are valid claims for the tests' verifiers, plus extra.
func claims(extra jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{"iss": "https://issuer.test", "aud": "api", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// reason is the httplimit.ErrJWT error err wraps, or err itself.
func reason(err error) error {
	for _, r := range []error{httplimit.ErrJWTMalformed, httplimit.ErrJWTSignature, httplimit.ErrJWTExpired,
		httplimit.ErrJWTNotYetValid, httplimit.ErrJWTClaims} {
		if errors.Is(err, r) {
			return r
		}
	}
	return err
}

// eventually polls cond every 10 ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
