package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/pgstore/pgtest"
)

// The seed's table, as the design gives it: --rules-db-install adds the
// trigger to a table that exists.
const rulesSeed = `CREATE TABLE RateLimitRule (
    rule_id          BIGSERIAL PRIMARY KEY,
    key_pattern      VARCHAR(128)  NOT NULL,
    scope            VARCHAR(32)   NOT NULL,
    rate_per_second  FLOAT         NOT NULL,
    burst_capacity   INT           NOT NULL,
    plan             VARCHAR(32),
    is_active        BOOLEAN       NOT NULL DEFAULT TRUE,
    description      TEXT,
    created_at       TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    UNIQUE (key_pattern, plan)
)`

// runFaucet runs faucet with args to its end and returns its exit code and
// its output.
func runFaucet(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(faucetBinary(t), args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// faucet serve --rules-db: a bad row is reported and left out, a change
// is in force at once with the buckets of unchanged rows kept, an outage
// keeps the rules in force, and the server's return is noticed.
func TestServeRulesDBEndToEnd(t *testing.T) {
	srv := pgtest.Start(t)
	srv.Exec(t, rulesSeed)
	srv.Exec(t, `INSERT INTO RateLimitRule (rule_id, key_pattern, scope, rate_per_second, burst_capacity) VALUES
		(1, 'ip:{ip}', 'ip', 0.001, 3), (2, 'user:{user_id}', 'user', -1, 10)`)
	dsn := srv.DSN()

	code, out := runFaucet(t, "serve", "--rules-db", dsn, "--rules-db-user-key", "header:x-user", "--validate")
	if code != 2 || !strings.Contains(out, `rule 2: rate_per_second: must be between 1/31622400 (one token per 366 days) and 1e9 tokens per second, got -1`) {
		t.Errorf("--validate with a bad row: exit %d, want 2 and the row's problem:\n%s", code, out)
	}

	p := startServe(t, "--rules-db", dsn, "--rules-db-install", "--rules-db-user-key", "header:x-user", "--rules-db-poll", "1h",
		"--audit-db", dsn, "--audit-install")
	if !regexp.MustCompile(`rows left out.*rule 2: rate_per_second`).MatchString(p.log()) {
		t.Error("the bad row was not logged at start")
	}
	allowed := func(ip string) bool { return checkVia(t, p, ip).Allowed }
	for i := range 3 {
		if !allowed("192.0.2.1") {
			t.Fatalf("request %d of the burst of 3 denied", i+1)
		}
	}
	if allowed("192.0.2.1") {
		t.Fatal("fourth request allowed, want the burst of 3 spent")
	}
	// The denial is in the audit log under its row's rule_id.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := pgtest.QueryRow(dsn, `SELECT count(*) FROM ratelimitviolation WHERE rule_id = 1 AND rule_name = 'rule-1'`, &n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d audit rows with rule_id 1 after 20 s, want the one denial", n)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// checkVia asks for path /x: one bucket for all its clients.
	srv.Exec(t, `INSERT INTO RateLimitRule (rule_id, key_pattern, scope, rate_per_second, burst_capacity) VALUES (3, 'endpoint:/x', 'endpoint', 0.001, 1)`)
	p.waitFor(t, regexp.MustCompile(`reloaded rules.*rules=2`))
	if allowed("192.0.2.1") {
		t.Error("rule 1 unchanged by the reload: its bucket was refilled")
	}
	if !allowed("192.0.2.2") || allowed("192.0.2.3") {
		t.Error("endpoint:/x with a burst of 1: want the first client allowed, the next denied")
	}

	srv.Exec(t, `CHECKPOINT`)
	srv.Stop()
	p.waitFor(t, regexp.MustCompile(`not listening for changes`))
	if allowed("192.0.2.1") {
		t.Error("database down: want the rules in force still")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	srv.Exec(t, `DELETE FROM RateLimitRule WHERE rule_id = 3`)
	p.waitFor(t, regexp.MustCompile(`reloaded rules.*rules=1`))
	if !allowed("192.0.2.5") {
		t.Error("endpoint:/x's row deleted after the restart: want a new client allowed")
	}
}

func TestServeRulesDBRefusals(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--rules", "rules.example.json", "--rules-db", "postgres://u@127.0.0.1:1/db"}, 2, "--rules, --rules-db: give one"},
		{[]string{"--rules-db", "postgres://u:secret@127.0.0.1:1/db"}, 2, "--rules-db: the DSN must not hold a password"},
		{[]string{"--rules-db", "postgres://u@127.0.0.1:1/db", "--rules-db-table", "a;b"}, 2, "--rules-db-table: table \"a;b\""},
		{[]string{"--rules-db-install"}, 2, "only mean something with --rules-db"},
		// Nothing listens on port 1: serve does not start.
		{[]string{"--rules-db", "postgres://u@127.0.0.1:1/db?connect_timeout=5"}, 1, "--rules-db: 127.0.0.1"},
	} {
		code, out := runFaucet(t, append([]string{"serve"}, tt.args...)...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%q: exit %d, want %d and %q:\n%s", tt.args, code, tt.code, tt.want, out)
		}
	}
}
