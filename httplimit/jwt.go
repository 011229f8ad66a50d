package httplimit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// maxJWTBytes bounds the bearer token that is verified or decoded.
const maxJWTBytes = 8 << 10

// JWTVerifier verifies the bearer tokens whose claims jwt: limit keys and
// matches read (Options.JWT). The module github.com/faucetgo/faucet/jwtverify
// implements it with HS256 secrets and JSON Web Key Sets.
type JWTVerifier interface {
	// VerifyJWT checks token, a JWS in compact form, as an authentication
	// step would (signature and algorithm, expiry, issuer, audience) and
	// returns its claims. An error makes the request count as carrying no
	// token; wrapping one of the ErrJWT errors says why, for JWTStats. It is
	// called concurrently, at most once per request, and only when a rule
	// that applies needs a claim; it should not block on the network.
	VerifyJWT(token string) (Claims, error)
}

// Claims are a token's claims, as encoding/json decodes a JSON object. Keys
// and matches compare a string claim as the string and any other as its
// compact JSON text (42, true, object keys sorted); a json.Number is its
// text, so decoding with UseNumber keeps every digit of a large number.
// Absent and null claims are missing.
type Claims map[string]any

// A JWTVerifier's error wraps one of these to say why it rejected a token.
var (
	// ErrJWTMalformed: not a JWS in compact form with a JSON object as its
	// payload, or larger than 8 KiB.
	ErrJWTMalformed = errors.New("malformed JWT")
	// ErrJWTSignature: the signature does not verify, no key is known for
	// the token, or its algorithm is not allowed ("none" never is) or not the
	// one of its key.
	ErrJWTSignature = errors.New("JWT signature not verified")
	// ErrJWTExpired: exp is past, beyond the allowed clock skew.
	ErrJWTExpired = errors.New("JWT expired")
	// ErrJWTNotYetValid: nbf or iat is in the future, beyond the allowed
	// clock skew.
	ErrJWTNotYetValid = errors.New("JWT not yet valid")
	// ErrJWTClaims: a wrong or missing issuer or audience, or a required
	// claim (such as exp) missing or of the wrong type.
	ErrJWTClaims = errors.New("JWT claims rejected")
)

// JWTStats counts the bearer tokens that were treated as absent because
// they were rejected, by reason (the ErrJWT errors); Other counts errors
// that wrap none of them. Only tokens that some rule needed are looked at.
type JWTStats struct {
	Malformed, Signature, Expired, NotYetValid, Claims, Other uint64
}

// JWTStats returns the counts of rejected tokens since New.
func (l *Middleware) JWTStats() JWTStats {
	c := &l.opts.jwtRejected
	return JWTStats{Malformed: c.malformed.Load(), Signature: c.signature.Load(), Expired: c.expired.Load(),
		NotYetValid: c.notYetValid.Load(), Claims: c.claims.Load(), Other: c.other.Load()}
}

// jwtCounters back JWTStats.
type jwtCounters struct {
	malformed, signature, expired, notYetValid, claims, other atomic.Uint64
}

func (c *jwtCounters) count(err error) {
	switch {
	case errors.Is(err, ErrJWTMalformed):
		c.malformed.Add(1)
	case errors.Is(err, ErrJWTSignature):
		c.signature.Add(1)
	case errors.Is(err, ErrJWTExpired):
		c.expired.Add(1)
	case errors.Is(err, ErrJWTNotYetValid):
		c.notYetValid.Add(1)
	case errors.Is(err, ErrJWTClaims):
		c.claims.Add(1)
	default:
		c.other.Add(1)
	}
}

// UsesJWT reports whether the rule keys or matches on JWT claims.
func (r *Rule) UsesJWT() bool {
	for _, k := range r.LimitKeys {
		if spec, msg := parseKey(k, false); msg == "" && spec.kind == kindJWT {
			return true
		}
	}
	for k := range r.Match {
		if spec, msg := parseKey(k, true); msg == "" && spec.kind == kindJWT {
			return true
		}
	}
	return false
}

// validateJWT reports the jwt: keys and matches of rules that would run on
// unverified claims without having said so: anyone can write any claim into
// a token that nothing verifies.
func validateJWT(rules []Rule, verified bool, p *problems) {
	if verified {
		return
	}
	const why = `reads a JWT claim, but no verifier is configured (Options.JWT), so any client could claim any value; configure verification, or set "insecure_unverified_jwt": true to accept unverified claims`
	for i := range rules {
		r := &rules[i]
		if r.InsecureUnverifiedJWT {
			continue
		}
		for j, k := range r.LimitKeys {
			if spec, msg := parseKey(k, false); msg == "" && spec.kind == kindJWT {
				p.add(r.Name, i, "limit_keys["+itoa(j)+"]", "%s", why)
			}
		}
		for _, k := range sortedKeys(r.Match) {
			if spec, msg := parseKey(k, true); msg == "" && spec.kind == kindJWT {
				p.add(r.Name, i, "match."+k, "%s", why)
			}
		}
		for j := range r.Limits {
			for _, src := range anchorFields(&r.Limits[j].AnchorFrom) {
				if spec, msg := parseKey(src.v, false); msg == "" && spec.kind == kindJWT {
					p.add(r.Name, i, "limits["+itoa(j)+"].anchor_from."+src.field, "%s", why)
				}
			}
		}
	}
}

// anchorFields are the sources of an AnchorFrom with their JSON names.
func anchorFields(a *AnchorFrom) []struct{ field, v string } {
	return []struct{ field, v string }{{"day", a.Day}, {"weekday", a.Weekday}, {"hour", a.Hour}, {"time_zone", a.TimeZone}}
}

// validateAnchorHeaders reports anchors read from a header when no proxy
// is trusted: such a header is read only from a trusted proxy, so it
// would never be.
func validateAnchorHeaders(rules []Rule, trusted bool, p *problems) {
	if trusted {
		return
	}
	for i := range rules {
		r := &rules[i]
		for j := range r.Limits {
			for _, src := range anchorFields(&r.Limits[j].AnchorFrom) {
				if spec, msg := parseKey(src.v, false); msg == "" && spec.kind == kindHeader {
					p.add(r.Name, i, "limits["+itoa(j)+"].anchor_from."+src.field,
						"an anchor is read from a header only on a request from a trusted proxy, and no proxy is trusted (Options.TrustedProxies)")
				}
			}
		}
	}
}

// claims returns the claims of r's bearer token: verified by Options.JWT,
// or, without one, decoded unverified (New admits that only for rules that
// opted in). An unverified payload is decoded into *buf (appended) and, if
// scanClaim can read it (simpleClaims), returned as it is rather than
// decoded into claims. Both nil: no token, or one that was rejected and
// counted.
func (o *options) claims(r *http.Request, buf *[]byte) (c Claims, payload []byte) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, nil
	}
	err := ErrJWTMalformed
	if token = strings.TrimSpace(token); len(token) <= maxJWTBytes {
		if o.jwt != nil {
			c, err = o.jwt.VerifyJWT(token)
		} else {
			payload, c, err = decodeUnverified(token, buf)
		}
	}
	if err != nil {
		o.jwtRejected.count(err)
		return nil, nil
	}
	return c, payload
}

// decodeUnverified decodes a token's payload WITHOUT verifying anything,
// into *buf: the payload itself when simpleClaims accepts it, else its
// claims.
func decodeUnverified(token string, buf *[]byte) (payload []byte, c Claims, err error) {
	if strings.Count(token, ".") != 2 {
		return nil, nil, ErrJWTMalformed
	}
	_, rest, _ := strings.Cut(token, ".")
	text, _, _ := strings.Cut(rest, ".")
	text = strings.TrimRight(text, "=")
	// The text is copied after room for what it decodes to, so that neither
	// needs memory of its own once the buffer is large enough.
	b := *buf
	start := len(b)
	n := base64.RawURLEncoding.DecodedLen(len(text))
	b = append(slices.Grow(b, n+len(text))[:start+n], text...)
	n, err = base64.RawURLEncoding.Decode(b[start:start+n], b[start+n:])
	if err != nil {
		*buf = b[:start] // grown, for the next token
		return nil, nil, ErrJWTMalformed
	}
	*buf = b[:start+n]
	payload = b[start : start+n : start+n]
	if simpleClaims(payload) {
		return payload, nil, nil
	}
	c, err = decodeClaims(payload)
	return nil, c, err
}

// decodeClaims decodes a payload: one JSON object, numbers as json.Number.
func decodeClaims(payload []byte) (Claims, error) {
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var c Claims
	if d.Decode(&c) != nil || c == nil {
		return nil, ErrJWTMalformed
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, ErrJWTMalformed
	}
	return c, nil
}

// claimString is a claim's value as keys and matches compare it (see
// Claims); absent or null is "" and ok false.
func claimString(claims Claims, name string) (string, bool) {
	switch v := claims[name].(type) {
	case nil:
		return "", false
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	default:
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if e.Encode(v) != nil {
			return "", false
		}
		return strings.TrimSuffix(b.String(), "\n"), true
	}
}
