package httplimit_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// issuer stands for an identity provider and the verifier that trusts it:
// the tokens it issued verify, with the claims it issued them with, and any
// other token is rejected as a bad signature. (The real verifier, with real
// keys, is tested in the jwtverify module.)
type issuer struct {
	mu       sync.Mutex
	issued   map[string]httplimit.Claims
	rejected map[string]error
	n        int
	calls    atomic.Int64
}

func newIssuer() *issuer {
	return &issuer{issued: map[string]httplimit.Claims{}, rejected: map[string]error{}}
}

// token issues a token with claims and returns its Authorization value. The
// claims are decoded with UseNumber, as a verifier would.
func (is *issuer) token(claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var c httplimit.Claims
	if err := d.Decode(&c); err != nil {
		panic(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.n++
	tok := jws(`{"alg":"ES256"}`, claims, fmt.Sprintf("signature-%d", is.n))
	is.issued[tok] = c
	return "Bearer " + tok
}

// reject makes the verifier reject token with err.
func (is *issuer) reject(token string, err error) string {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.rejected[token] = err
	return "Bearer " + token
}

func (is *issuer) VerifyJWT(token string) (httplimit.Claims, error) {
	is.calls.Add(1)
	is.mu.Lock()
	defer is.mu.Unlock()
	if err, ok := is.rejected[token]; ok {
		return nil, err
	}
	if c, ok := is.issued[token]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("not issued here: %w", httplimit.ErrJWTSignature)
}

// jws is a compact JWS with the given header, claims and signature bytes.
func jws(header string, claims map[string]any, sig string) string {
	payload, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc(payload) + "." + enc([]byte(sig))
}

// forged is the Authorization value of an unsigned token (alg none) with
// claims: what anyone can write.
func forged(claims map[string]any) string {
	return "Bearer " + jws(`{"alg":"none","typ":"JWT"}`, claims, "")
}

// newVerifyingLimiter is newLimiter with the issuer as Options.JWT.
func newVerifyingLimiter(t *testing.T, doc string) (*httplimit.Middleware, *clock, *issuer) {
	t.Helper()
	is := newIssuer()
	l, c := newLimiter(t, doc, httplimit.Options{JWT: is})
	return l, c, is
}
