// Package jwtverify verifies the bearer tokens whose claims httplimit's
// jwt: keys and matches read, so that a client cannot pick its own tier or
// spend another tenant's bucket with a token it wrote itself. It is its own
// module, so that the JWT libraries stay out of the core's dependencies.
//
//	v, err := jwtverify.New(jwtverify.Config{
//		JWKSURL:  "https://idp.example/.well-known/jwks.json",
//		Issuer:   "https://idp.example/",
//		Audience: "api",
//	})
//	...
//	defer v.Close()
//	lim, err := httplimit.New(rules, httplimit.Options{JWT: v})
//
// Tokens are parsed and checked by github.com/golang-jwt/jwt/v5, keys read
// from JSON Web Key Sets by github.com/MicahParks/jwkset and looked up by key
// ID with github.com/MicahParks/keyfunc/v3; this package only chooses what
// is accepted:
//
//   - HS256 with Config.Secret; RS256 (keys of 2048 bits or more), ES256
//     (P-256) and EdDSA (Ed25519) with keys of a key set. Never "none", never
//     HS256 with a key of the set (so a public key cannot serve as an HMAC
//     secret), and never a key of another type than the token's algorithm.
//   - exp is required (Config.ExpOptional lifts that), and exp, nbf and iat
//     are checked with Config.Leeway of clock skew (30 s by default, at most
//     5 min); iss and aud when Config.Issuer and Config.Audience are set.
//   - A key set file is re-read every 2 s, a URL fetched every 10 min (with
//     a timeout, at most 1 MiB) and also when a token names a key ID the
//     set lacks, at most every 30 s: a rotation is picked up without a
//     restart, and made-up key IDs cannot flood the key server. Requests
//     never wait for a fetch: a token with an unknown key ID is rejected
//     until the new set is in. A set that fails to load or parse leaves the
//     previous keys in force (Config.OnRefreshError hears of it); the first
//     load must succeed, or New fails.
//
// A rejected token's error wraps the httplimit.ErrJWT error of its reason,
// which httplimit counts in Limiter.JWTStats.
package jwtverify
