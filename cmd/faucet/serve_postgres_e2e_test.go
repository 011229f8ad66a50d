package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/pgstore/pgtest"
)

// Two faucet serve instances with the same rules and --postgres enforce one
// limit between them, as with --redis: burst 10 at 1 token per 100 s admits
// exactly 10 of 30 requests sent to them in turn. The rule fails closed and
// the deadline is generous, so a store failure shows as one, not as extra
// admissions.
func TestServePostgresSharedLimitEndToEnd(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.DSN()
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
	  "algorithm_config":{"rps":0.01,"burst":10},"fail_mode":"closed"}]}`)
	// Without the schema, the start fails and says how to create it.
	if code, _, errs := runArgs("serve", "--rules", rules, "--postgres", dsn, "--listen", "127.0.0.1:0"); code == 0 || !strings.Contains(errs, "--postgres-install") {
		t.Fatalf("no schema: exit %d, %q; want a failed start pointing at --postgres-install", code, errs)
	}
	a := startServe(t, "--rules", rules, "--postgres", dsn, "--postgres-install", "--postgres-timeout", "10s")
	b := startServe(t, "--rules", rules, "--postgres", dsn, "--postgres-timeout", "10s")
	if n := admittedAlternately(t, a, b, 30); n != 10 {
		t.Errorf("two instances sharing PostgreSQL admitted %d of 30, want 10 (one burst)", n)
	}
	c := startServe(t, "--rules", rules, "--postgres", dsn, "--postgres-timeout", "10s", "--postgres-prefix", "other:")
	if n := admittedAlternately(t, c, c, 30); n != 10 {
		t.Errorf("an instance under another prefix admitted %d of 30, want its own burst of 10", n)
	}
}

// The PostgreSQL flags are checked before anything starts.
func TestServePostgresBadFlags(t *testing.T) {
	code, _, errs := runArgs("serve", "--postgres", "postgres://u:secret@127.0.0.1/db", "--redis", "127.0.0.1:6379",
		"--postgres-timeout", "0s", "--postgres-table", "Bad-Name", "--postgres-fallback-share", "2",
		"--postgres-logged", "--postgres-sweep", "-1s", "--validate")
	for _, want := range []string{"--postgres: one bucket store at a time", "--postgres: the DSN must not hold a password",
		"--postgres-timeout: must be positive", `Table must be a lower-case identifier`, "--postgres-fallback-share: must be in (0, 1]",
		"--postgres-logged: only means something with --postgres-install", "--postgres-sweep: must be 0 (never) or positive"} {
		if !strings.Contains(errs, want) {
			t.Errorf("output lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "secret") {
		t.Errorf("the output repeats the password:\n%s", errs)
	}
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if code, _, errs := runArgs("serve", "--postgres-table", "x", "--validate"); code != 2 || !strings.Contains(errs, "only mean something with --postgres") {
		t.Errorf("--postgres-table without --postgres: exit %d, %q", code, errs)
	}
}
