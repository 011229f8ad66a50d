package jwtverify_test

import (
	"testing"

	"github.com/faucetgo/faucet/jwtverify"
	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkVerifyJWT is the cost a request with a token pays when a rule
// reads a claim: parsing, the signature and the claims' checks.
func BenchmarkVerifyJWT(b *testing.B) {
	rs, es, ed := rsaSigner(b, "rsa"), ecSigner(b, "ec"), edSigner(b, "ed")
	v, _ := fileVerifier(b, jwtverify.Config{Secret: secret}, rs, es, ed)
	extra := jwt.MapClaims{"plan": "enterprise", "org_id": "acme", "sub": "user-12345"}
	for _, bc := range []struct{ alg, token string }{
		{"HS256", signToken(b, jwt.SigningMethodHS256, secret, "", claims(extra))},
		{"RS256", rs.sign(b, claims(extra))},
		{"ES256", es.sign(b, claims(extra))},
		{"EdDSA", ed.sign(b, claims(extra))},
	} {
		b.Run("alg="+bc.alg, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.VerifyJWT(bc.token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
