package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/jwtverify"
)

// jwtSecretEnv holds the HS256 secret: never a flag, which anyone on the
// machine can read in the process list.
const jwtSecretEnv = "FAUCET_JWT_SECRET"

// jwtFlags are serve's flags for verifying the JWTs whose claims rules read.
type jwtFlags struct {
	jwksFile    string
	jwksURL     string
	issuer      string
	audience    string
	algorithms  string
	leeway      time.Duration
	refresh     time.Duration
	expOptional bool

	verified bool         // a verifier runs; set by startJWT
	log      *slog.Logger // set by startJWT
}

func (f *jwtFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.jwksFile, "jwt-jwks-file", "", "verify JWTs with the RS256, ES256 and EdDSA keys of this JSON Web Key Set `FILE`, re-read when it changes")
	fs.StringVar(&f.jwksURL, "jwt-jwks-url", "", "verify JWTs with the key set at this https `URL`, fetched again periodically and when a token names an unknown key")
	fs.StringVar(&f.issuer, "jwt-issuer", "", "the iss claim every JWT must have")
	fs.StringVar(&f.audience, "jwt-audience", "", "a value the aud claim of every JWT must hold")
	fs.DurationVar(&f.leeway, "jwt-leeway", jwtverify.DefaultLeeway, "clock skew allowed when checking exp, nbf and iat, at most 5m")
	fs.StringVar(&f.algorithms, "jwt-algorithms", "", "comma `LIST` of the accepted algorithms, among HS256, RS256, ES256, EdDSA (default: all that the keys allow)")
	fs.DurationVar(&f.refresh, "jwt-jwks-refresh", 0, "how often to re-read the key set (0: 2s for a file, 10m for a URL)")
	fs.BoolVar(&f.expOptional, "jwt-exp-optional", false, "accept JWTs without exp, which never expire")
}

// config is the verifier's configuration, and whether verification is asked
// for at all: by a key set or the secret.
func (f *jwtFlags) config() (jwtverify.Config, bool) {
	c := jwtverify.Config{JWKSFile: f.jwksFile, JWKSURL: f.jwksURL, Issuer: f.issuer, Audience: f.audience,
		Leeway: f.leeway, RefreshInterval: f.refresh, ExpOptional: f.expOptional}
	if s, ok := os.LookupEnv(jwtSecretEnv); ok {
		c.Secret = []byte(s)
	}
	if f.algorithms != "" {
		for a := range strings.SplitSeq(f.algorithms, ",") {
			c.Algorithms = append(c.Algorithms, strings.TrimSpace(a))
		}
	}
	return c, c.Secret != nil || c.JWKSFile != "" || c.JWKSURL != ""
}

// jwtSources names what sets each field of jwtverify.Config.
var jwtSources = map[string]string{
	"Secret": jwtSecretEnv, "JWKSFile": "--jwt-jwks-file", "JWKSURL": "--jwt-jwks-url", "Algorithms": "--jwt-algorithms",
	"Leeway": "--jwt-leeway", "RefreshInterval": "--jwt-jwks-refresh", "Issuer": "--jwt-issuer", "Audience": "--jwt-audience",
}

// problems lists what is wrong with the JWT flags, without loading keys.
func (f *jwtFlags) problems() []string {
	c, on := f.config()
	if !on {
		if f.issuer != "" || f.audience != "" || f.algorithms != "" || f.leeway != jwtverify.DefaultLeeway || f.refresh != 0 || f.expOptional {
			return []string{"--jwt-issuer, --jwt-audience, --jwt-leeway, --jwt-algorithms, --jwt-jwks-refresh, --jwt-exp-optional: only mean something with --jwt-jwks-file, --jwt-jwks-url or " + jwtSecretEnv}
		}
		return nil
	}
	return jwtProblems(c.Validate())
}

// jwtProblems turns a jwtverify error into lines naming the flags.
func jwtProblems(err error) []string {
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

// startJWT starts the verifier the flags ask for (loading its keys) as
// opts.JWT, checks the rules against it, and warns of every rule that runs
// on unverified claims. The function it returns stops the verifier.
func (cfg *serveConfig) startJWT(opts *httplimit.Options, rules []httplimit.Rule, logger *slog.Logger) (func(), error) {
	f := &cfg.jwt
	f.log = logger
	stop := func() {}
	if c, on := f.config(); on {
		// jwtverify reports each distinct refresh error once.
		c.OnRefreshError = func(err error) { f.log.Warn("JWT key set not refreshed", "err", err) }
		v, err := jwtverify.New(c)
		if err != nil {
			return nil, errors.New(strings.Join(jwtProblems(err), "\n"))
		}
		opts.JWT, f.verified = v, true
		stop = func() { v.Close() }
	}
	if err := httplimit.Validate(rules, *opts); err != nil {
		stop()
		if !f.verified && usesJWT(rules) {
			// The library's message names Options.JWT; say what serve has.
			return nil, fmt.Errorf("%s: %w\n  (verify tokens with --jwt-jwks-file, --jwt-jwks-url or %s)", cfg.rulesName(), err, jwtSecretEnv)
		}
		return nil, fmt.Errorf("%s: %w", cfg.rulesName(), err)
	}
	f.warn(rules)
	return stop, nil
}

func usesJWT(rules []httplimit.Rule) bool {
	for i := range rules {
		if rules[i].UsesJWT() {
			return true
		}
	}
	return false
}

// warn logs every rule that reads claims nobody verifies.
func (f *jwtFlags) warn(rules []httplimit.Rule) {
	if f.verified {
		return
	}
	for _, r := range rules {
		if r.InsecureUnverifiedJWT && r.UsesJWT() {
			f.log.Warn("rule reads JWT claims WITHOUT verification (insecure_unverified_jwt): any client can claim any value; verify tokens with --jwt-jwks-file, --jwt-jwks-url or "+jwtSecretEnv, "rule", r.Name)
		}
	}
}
