package httplimit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// maxJWTBytes bounds the token that is decoded.
const maxJWTBytes = 8 << 10

// jwtClaims decodes the claims of the bearer token in the Authorization
// header, WITHOUT verifying its signature: a client can put anything there,
// so a jwt: key or match is only as good as the authentication in front of
// the limiter or behind it that rejects forged tokens. nil means no token or
// an undecodable one.
func jwtClaims(r *http.Request) map[string]json.RawMessage {
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || len(token) > maxJWTBytes {
		return nil
	}
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil
	}
	var claims map[string]json.RawMessage
	if json.Unmarshal(payload, &claims) != nil {
		return nil
	}
	return claims
}

// claimString is a claim's value as keys and matches compare it: a string as
// is, anything else (numbers, booleans, objects) as its compact JSON text;
// absent or null is "" and ok false.
func claimString(claims map[string]json.RawMessage, name string) (string, bool) {
	raw, ok := claims[name]
	if !ok || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "", false
	}
	return b.String(), true
}
