package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/jackc/pgx/v5"
)

// metricValue is the value of an unlabelled metric on p's admin listener,
// or -1 if it is not there.
func metricValue(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	_, body := get(t, p.adminURL("/metrics"))
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// eventually polls cond for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// faucet serve --audit-db writes every denial to the table, with the
// client's address and the endpoint; with the database stopped, checks are
// answered as ever, the queue fills and the rest are dropped and counted;
// when the database is back, the queue is written.
func TestServeAuditEndToEnd(t *testing.T) {
	srv := pgtest.Start(t, "synchronous_commit = on")
	rules := t.TempDir() + "/rules.json"
	writeRules(t, rules, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":0.001,"burst":1}}]}`)
	// Without the table, the start fails and says how to create it.
	if code, _, errs := runArgs("serve", "--rules", rules, "--audit-db", srv.DSN(), "--audit-table", "denials", "--listen", "127.0.0.1:0"); code == 0 || !strings.Contains(errs, "--audit-install") {
		t.Fatalf("no audit table: exit %d, %q; want a failed start pointing at --audit-install", code, errs)
	}
	p := startServe(t, "--rules", rules, "--audit-db", srv.DSN(), "--audit-table", "denials", "--audit-queue", "5", "--audit-install")
	// query scans the one row of sql on the audit database.
	query := func(sql string, dest ...any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, srv.DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if err := c.QueryRow(ctx, sql).Scan(dest...); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() (n int64) {
		query(`SELECT count(*) FROM denials`, &n)
		return n
	}
	client := 0
	deny := func(n int) {
		t.Helper()
		for range n {
			client++
			ip := "203.0.113." + strconv.Itoa(client)
			checkVia(t, p, ip)
			if d := checkVia(t, p, ip); d.Allowed || d.Status != 429 {
				t.Fatalf("second check of %s: allowed %v, status %d; want 429", ip, d.Allowed, d.Status)
			}
		}
	}
	deny(3)
	eventually(t, "3 rows", func() bool { return rows() == 3 })
	var ip, endpoint, key string
	query(`SELECT host(ip_address), endpoint, bucket_key FROM denials WHERE rule_name = 'per-ip' ORDER BY violation_id LIMIT 1`, &ip, &endpoint, &key)
	if ip != "203.0.113.1" || key != "203.0.113.1" || !strings.HasSuffix(endpoint, " /x") {
		t.Errorf("first row: ip %q, endpoint %q, bucket_key %q", ip, endpoint, key)
	}
	if v := metricValue(t, p, "faucet_audit_written_total"); v != 3 {
		t.Errorf("faucet_audit_written_total %v, want 3", v)
	}

	srv.Stop()
	deny(1)
	eventually(t, "a failed COPY", func() bool { return metricValue(t, p, "faucet_audit_failed_batches_total") >= 1 })
	start := time.Now()
	deny(20) // answered while the database is down
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("40 checks took %v with the audit database down", took)
	}
	if d, q := metricValue(t, p, "faucet_audit_dropped_total"), metricValue(t, p, "faucet_audit_queue_length"); d != 15 || q != 6 {
		t.Errorf("database down: dropped %v, queued %v; want 15 (20 beyond a queue of 5) and 6 (the queue and the batch held)", d, q)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the queue written", func() bool { return metricValue(t, p, "faucet_audit_queue_length") == 0 })
	if n, w := rows(), metricValue(t, p, "faucet_audit_written_total"); n != 9 || w != 9 {
		t.Errorf("database back: %d rows, written %v; want 9 (3, the batch held and the queue of 5)", n, w)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.done; err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}

// The audit flags are checked before anything starts.
func TestServeAuditBadFlags(t *testing.T) {
	code, _, errs := runArgs("serve", "--audit-db", "postgres://faucet:secret@127.0.0.1/db", "--audit-table", "Audit",
		"--audit-queue", "0", "--validate")
	for _, want := range []string{"--audit-db: the DSN must not hold a password", `--audit-table: pgaudit: invalid table name`,
		`(PostgreSQL folds unquoted names to lower case: "audit")`, "--audit-queue: must be at least 1"} {
		if !strings.Contains(errs, want) {
			t.Errorf("output lacks %q:\n%s", want, errs)
		}
	}
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if code, _, errs := runArgs("serve", "--audit-queue", "5", "--validate"); code != 2 || !strings.Contains(errs, "only mean something with --audit-db") {
		t.Errorf("--audit-queue without --audit-db: exit %d, %q", code, errs)
	}
}
