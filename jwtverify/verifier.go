package jwtverify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"sync"

	"github.com/MicahParks/jwkset"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/golang-jwt/jwt/v5"
)

// Verifier checks bearer tokens for httplimit (Options.JWT). Make one with
// New; it is safe for concurrent use, and Close stops its key set's refresh
// goroutine.
type Verifier struct {
	parser *jwt.Parser
	secret []byte
	keys   *keySet // nil without a key set
	once   sync.Once
}

var _ httplimit.JWTVerifier = (*Verifier)(nil)

// New returns a Verifier for c, with the key set loaded; it fails with a
// *ConfigError listing every bad field, or naming the key set that cannot be
// loaded (a verifier without keys would reject every token).
func New(c Config) (*Verifier, error) {
	s, err := c.resolve()
	if err != nil {
		return nil, err
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(s.algorithms),
		jwt.WithJSONNumber(), // claims keep the digits of large numbers
		jwt.WithLeeway(s.leeway),
		jwt.WithIssuedAt(),
	}
	if !c.ExpOptional {
		opts = append(opts, jwt.WithExpirationRequired())
	}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	if c.Audience != "" {
		opts = append(opts, jwt.WithAudience(c.Audience))
	}
	if c.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(c.Now))
	}
	v := &Verifier{parser: jwt.NewParser(opts...), secret: bytes.Clone(c.Secret)}
	if c.JWKSFile != "" || c.JWKSURL != "" {
		if v.keys, err = newKeySet(s); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// VerifyJWT implements httplimit.JWTVerifier: it checks the signature with a
// key of the token's algorithm, exp (required unless Config.ExpOptional),
// nbf and iat with the leeway, the issuer and the audience, and returns the
// claims, numbers as json.Number. Its errors wrap the httplimit.ErrJWT
// error of their reason.
func (v *Verifier) VerifyJWT(token string) (httplimit.Claims, error) {
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, v.key); err != nil {
		return nil, classify(err)
	}
	return httplimit.Claims(claims), nil
}

// Close stops the key set's refresh; VerifyJWT keeps working with the keys
// last loaded.
func (v *Verifier) Close() error {
	v.once.Do(func() {
		if v.keys != nil {
			v.keys.close()
		}
	})
	return nil
}

// key picks the key for a token whose algorithm the parser has already
// found allowed: the secret for HS256, otherwise the key set's key of that
// ID (or, without an ID, every key) that is of the algorithm's type.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		// RFC 7515, section 4.1.11: extensions we do not understand.
		return nil, errors.New(`the header has "crit", and no extension is supported`)
	}
	alg := t.Method.Alg()
	if alg == algHS256 {
		if v.secret == nil {
			return nil, errors.New("no HS256 secret")
		}
		return v.secret, nil
	}
	if v.keys == nil {
		return nil, fmt.Errorf("no key set for %s", alg)
	}
	key, err := v.keys.keyfunc.Keyfunc(t)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		v.keys.unknownKey() // perhaps a rotation: reload the set, no waiting here
	}
	if err != nil {
		return nil, err
	}
	if set, ok := key.(jwt.VerificationKeySet); ok {
		var fit jwt.VerificationKeySet
		for _, k := range set.Keys {
			if fits(alg, k) {
				fit.Keys = append(fit.Keys, k)
			}
		}
		if len(fit.Keys) == 0 {
			return nil, fmt.Errorf("the key set has no %s key", alg)
		}
		return fit, nil
	}
	if !fits(alg, key) {
		// Algorithm confusion: the token's algorithm is not its key's.
		return nil, fmt.Errorf("key %v is a %T, not a %s key", t.Header["kid"], key, alg)
	}
	return key, nil
}

// fits reports whether key is of the type alg verifies with. RSA keys must
// have at least 2048 bits (RFC 7518, section 3.3).
func fits(alg string, key any) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return alg == algRS256 && k.N.BitLen() >= 2048
	case *ecdsa.PublicKey:
		return alg == algES256 && k.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == algEdDSA
	}
	return false
}

// classify wraps a parser error in the httplimit reason it stands for.
func classify(err error) error {
	var reason error
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		reason = httplimit.ErrJWTMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		reason = httplimit.ErrJWTSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		reason = httplimit.ErrJWTExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		reason = httplimit.ErrJWTNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		reason = httplimit.ErrJWTClaims
	default:
		return fmt.Errorf("jwtverify: %w", err)
	}
	return fmt.Errorf("jwtverify: %w: %w", reason, err)
}
