package jwtverify

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("jwtverify: invalid config")

// Config describes a Verifier. At least one key source is required: Secret,
// JWKSFile or JWKSURL (not both of the last two). The zero value of every
// other field picks a documented default.
type Config struct {
	// Secret verifies HS256 tokens: at least 32 bytes, the size of the hash
	// (RFC 7518, section 3.2). nil: HS256 tokens are rejected.
	Secret []byte
	// JWKSFile is a JSON Web Key Set file whose RSA (RS256), EC P-256
	// (ES256) and Ed25519 (EdDSA) keys verify tokens. It is re-read every
	// RefreshInterval; a change takes effect once it parses.
	JWKSFile string
	// JWKSURL is the same key set fetched from an https:// URL (http://
	// only to a loopback address: keys fetched in clear text could be
	// replaced on the way, and with them any claim forged). It is fetched
	// again every RefreshInterval, and sooner when a token names a key ID
	// the set lacks (a key rotation), at most every MinRefreshInterval.
	JWKSURL string
	// Algorithms restricts the accepted "alg" values to a subset of HS256
	// (with Secret) and RS256, ES256, EdDSA (with a key set); empty: all that
	// the configured keys allow. "none" is never accepted, and a token whose
	// algorithm is not its key's is rejected, whatever this list says.
	Algorithms []string
	// Issuer, if set, must be the token's "iss".
	Issuer string
	// Audience, if set, must be in the token's "aud".
	Audience string
	// Leeway is the clock skew allowed when checking exp, nbf and iat: at
	// most 5 minutes; 0 picks DefaultLeeway.
	Leeway time.Duration
	// ExpOptional accepts tokens without "exp". By default they are
	// rejected: such a token never expires, so a leaked one, or one issued
	// before its holder's plan changed, would keep its tier and tenant for
	// ever.
	ExpOptional bool
	// RefreshInterval is how often the key set is re-read: between 100 ms
	// and 24 h; 0 picks 2 s for a file (a read that changes nothing unless
	// the file did) and 10 min for a URL.
	RefreshInterval time.Duration
	// MinRefreshInterval spaces the extra fetches that unknown key IDs ask
	// for, so that tokens with made-up key IDs cannot flood the key server:
	// between 100 ms and 1 h; 0 picks 30 s.
	MinRefreshInterval time.Duration
	// FetchTimeout bounds one fetch of JWKSURL: between 1 ms and 1 min; 0
	// picks 10 s. A key set larger than 1 MiB is refused.
	FetchTimeout time.Duration
	// HTTPClient fetches JWKSURL; nil: a client that follows redirects only
	// to URLs JWKSURL could be.
	HTTPClient *http.Client
	// OnRefreshError, if set, is called with every failed re-read of the key
	// set, from the refresh goroutine; the keys in force stay.
	OnRefreshError func(error)
	// Now is the clock that exp, nbf and iat are checked against; nil means
	// time.Now.
	Now func() time.Time
}

// DefaultLeeway is the clock skew allowed by default: enough for servers
// whose clocks are synchronised, far less than a token's lifetime.
const DefaultLeeway = 30 * time.Second

const (
	maxLeeway       = 5 * time.Minute
	minSecretBytes  = 32
	maxJWKSBytes    = 1 << 20
	fileRefresh     = 2 * time.Second
	urlRefresh      = 10 * time.Minute
	minRefresh      = 30 * time.Second
	fetchTimeout    = 10 * time.Second
	minRefreshBound = 100 * time.Millisecond
	maxRefreshBound = 24 * time.Hour
	maxMinRefresh   = time.Hour
	maxFetchTimeout = time.Minute
	minFetchTimeout = time.Millisecond
)

// The algorithms accepted: HMAC with the secret, the others with keys of a
// key set.
const (
	algHS256 = "HS256"
	algRS256 = "RS256"
	algES256 = "ES256"
	algEdDSA = "EdDSA"
)

// FieldError is one problem with one Config field.
type FieldError struct {
	// Field is the Config field's name, such as "Leeway".
	Field string
	// Problem says what is wrong and what is allowed.
	Problem string
}

// ConfigError lists every problem New found in a Config, a key set that
// cannot be loaded included; it wraps ErrInvalidConfig.
type ConfigError struct {
	Problems []FieldError
}

func (e *ConfigError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Field + ": " + p.Problem
	}
	return ErrInvalidConfig.Error() + ": " + strings.Join(parts, "; ")
}

func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// settings is a Config with its defaults applied.
type settings struct {
	Config
	algorithms []string
	leeway     time.Duration
	refresh    time.Duration
	minRefresh time.Duration
	timeout    time.Duration
}

// Validate reports every problem of c that New would, in a *ConfigError,
// without loading the key set.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve checks c and applies its defaults, reporting every problem.
func (c Config) resolve() (*settings, error) {
	var probs []FieldError
	bad := func(field, format string, args ...any) {
		probs = append(probs, FieldError{field, fmt.Sprintf(format, args...)})
	}
	s := &settings{Config: c}
	if c.Secret != nil && len(c.Secret) < minSecretBytes {
		bad("Secret", "must be at least %d bytes, the size of HS256's hash (RFC 7518, section 3.2), got %d", minSecretBytes, len(c.Secret))
	}
	jwks := c.JWKSFile != "" || c.JWKSURL != ""
	switch {
	case c.JWKSFile != "" && c.JWKSURL != "":
		bad("JWKSURL", "give a key set file or a URL, not both")
	case c.JWKSURL != "":
		if msg := checkURL(c.JWKSURL); msg != "" {
			bad("JWKSURL", "%s", msg)
		}
	case c.Secret == nil && !jwks:
		bad("Secret", "a key is required: Secret (HS256), JWKSFile or JWKSURL (RS256, ES256, EdDSA)")
	}
	if len(c.Algorithms) == 0 {
		if c.Secret != nil {
			s.algorithms = append(s.algorithms, algHS256)
		}
		if jwks {
			s.algorithms = append(s.algorithms, algRS256, algES256, algEdDSA)
		}
	}
	for _, a := range c.Algorithms {
		switch {
		case a == algHS256 && c.Secret == nil:
			bad("Algorithms", "HS256 needs a secret")
		case (a == algRS256 || a == algES256 || a == algEdDSA) && !jwks:
			bad("Algorithms", "%s needs a key set", a)
		case a == algHS256 || a == algRS256 || a == algES256 || a == algEdDSA:
			s.algorithms = append(s.algorithms, a)
		case strings.EqualFold(a, "none"):
			bad("Algorithms", `"none" is never accepted: it means no signature`)
		default:
			bad("Algorithms", "unknown algorithm %q; allowed: HS256, RS256, ES256, EdDSA", a)
		}
	}
	s.leeway = c.Leeway
	switch {
	case c.Leeway == 0:
		s.leeway = DefaultLeeway
	case c.Leeway < 0 || c.Leeway > maxLeeway:
		bad("Leeway", "must be between 0 (the default, %v) and %v, got %v", DefaultLeeway, maxLeeway, c.Leeway)
	}
	def := urlRefresh
	if c.JWKSFile != "" {
		def = fileRefresh
	}
	s.refresh = duration(c.RefreshInterval, def, minRefreshBound, maxRefreshBound, "RefreshInterval", bad)
	s.minRefresh = duration(c.MinRefreshInterval, minRefresh, minRefreshBound, maxMinRefresh, "MinRefreshInterval", bad)
	s.timeout = duration(c.FetchTimeout, fetchTimeout, minFetchTimeout, maxFetchTimeout, "FetchTimeout", bad)
	if s.HTTPClient == nil {
		s.HTTPClient = &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("more than 5 redirects")
			}
			if msg := checkURL(req.URL.String()); msg != "" {
				return fmt.Errorf("redirected: %s", msg)
			}
			return nil
		}}
	}
	if len(probs) > 0 {
		return nil, &ConfigError{Problems: probs}
	}
	return s, nil
}

// duration checks an interval field: 0 picks def, else it must be in
// [lo, hi].
func duration(v, def, lo, hi time.Duration, field string, bad func(field, format string, args ...any)) time.Duration {
	if v == 0 {
		return def
	}
	if v < lo || v > hi {
		bad(field, "must be between %v and %v, or 0 for the default (%v), got %v", lo, hi, def, v)
	}
	return v
}

// checkURL says what is wrong with a key set URL, or "".
func checkURL(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.Host != "" && (u.Scheme == "https" || u.Scheme == "http" && isLoopback(u.Hostname())) {
		return ""
	}
	return fmt.Sprintf("must be an https:// URL (http:// only to a loopback address), got %q", raw)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
