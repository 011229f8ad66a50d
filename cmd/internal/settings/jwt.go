package settings

import (
	"errors"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/faucetgo/faucet/jwtverify"
)

// JWTSecretEnv holds the HS256 secret: never a flag, which anyone on the
// machine can read in the process list.
const JWTSecretEnv = "FAUCET_JWT_SECRET"

// JWT are serve's flags for verifying the JWTs whose claims rules read.
type JWT struct {
	JWKSFile    string
	JWKSURL     string
	Issuer      string
	Audience    string
	Algorithms  string
	Leeway      time.Duration
	Refresh     time.Duration
	ExpOptional bool
}

func (f *JWT) register(fs *flag.FlagSet) {
	fs.StringVar(&f.JWKSFile, "jwt-jwks-file", "", "verify JWTs with the RS256, ES256 and EdDSA keys of this JSON Web Key Set `FILE`, re-read when it changes")
	fs.StringVar(&f.JWKSURL, "jwt-jwks-url", "", "verify JWTs with the key set at this https `URL`, fetched again periodically and when a token names an unknown key")
	fs.StringVar(&f.Issuer, "jwt-issuer", "", "the iss claim every JWT must have")
	fs.StringVar(&f.Audience, "jwt-audience", "", "a value the aud claim of every JWT must hold")
	fs.DurationVar(&f.Leeway, "jwt-leeway", jwtverify.DefaultLeeway, "clock skew allowed when checking exp, nbf and iat, at most 5m")
	fs.StringVar(&f.Algorithms, "jwt-algorithms", "", "comma `LIST` of the accepted algorithms, among HS256, RS256, ES256, EdDSA (default: all that the keys allow)")
	fs.DurationVar(&f.Refresh, "jwt-jwks-refresh", 0, "how often to re-read the key set (0: 2s for a file, 10m for a URL)")
	fs.BoolVar(&f.ExpOptional, "jwt-exp-optional", false, "accept JWTs without exp, which never expire")
}

// Config is the verifier's configuration, and whether verification is asked
// for at all: by a key set or the secret.
func (f *JWT) Config() (jwtverify.Config, bool) {
	c := jwtverify.Config{JWKSFile: f.JWKSFile, JWKSURL: f.JWKSURL, Issuer: f.Issuer, Audience: f.Audience,
		Leeway: f.Leeway, RefreshInterval: f.Refresh, ExpOptional: f.ExpOptional}
	if s, ok := os.LookupEnv(JWTSecretEnv); ok {
		c.Secret = []byte(s)
	}
	if f.Algorithms != "" {
		for a := range strings.SplitSeq(f.Algorithms, ",") {
			c.Algorithms = append(c.Algorithms, strings.TrimSpace(a))
		}
	}
	return c, c.Secret != nil || c.JWKSFile != "" || c.JWKSURL != ""
}

// jwtSources names what sets each field of jwtverify.Config.
var jwtSources = map[string]string{
	"Secret": JWTSecretEnv, "JWKSFile": "--jwt-jwks-file", "JWKSURL": "--jwt-jwks-url", "Algorithms": "--jwt-algorithms",
	"Leeway": "--jwt-leeway", "RefreshInterval": "--jwt-jwks-refresh", "Issuer": "--jwt-issuer", "Audience": "--jwt-audience",
}

// problems lists what is wrong with the JWT flags, without loading keys.
func (f *JWT) problems() []string {
	c, on := f.Config()
	if !on {
		if f.Issuer != "" || f.Audience != "" || f.Algorithms != "" || f.Leeway != jwtverify.DefaultLeeway || f.Refresh != 0 || f.ExpOptional {
			return []string{"--jwt-issuer, --jwt-audience, --jwt-leeway, --jwt-algorithms, --jwt-jwks-refresh, --jwt-exp-optional: only mean something with --jwt-jwks-file, --jwt-jwks-url or " + JWTSecretEnv}
		}
		return nil
	}
	return JWTProblems(c.Validate())
}

// JWTProblems turns a jwtverify error into lines naming the flags.
func JWTProblems(err error) []string {
	var ce *jwtverify.ConfigError
	if !errors.As(err, &ce) {
		if err == nil {
			return nil
		}
		return []string{err.Error()}
	}
	var out []string
	for _, p := range ce.Problems {
		src := jwtSources[p.Field]
		if src == "" {
			src = p.Field
		}
		out = append(out, src+": "+p.Problem)
	}
	return out
}
