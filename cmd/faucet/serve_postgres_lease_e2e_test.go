package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/pgstore"
	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/jackc/pgx/v5"
)

// Two faucet serve instances with --postgres and --lease decide from leases
// of the shared buckets, and still admit one burst between them, with
// nothing stranded in a lease: each ends the one in hand when it asks for
// the next. Leased buckets are apart from per-check ones: an instance
// checking per call under the same prefix gets a burst of its own.
func TestServePostgresLeaseEndToEnd(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.DSN()
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
	  "algorithm_config":{"rps":0.01,"burst":10},"fail_mode":"closed"}]}`)
	a := startServe(t, "--rules", rules, "--postgres", dsn, "--postgres-install", "--postgres-timeout", "10s", "--lease")
	b := startServe(t, "--rules", rules, "--postgres", dsn, "--postgres-timeout", "10s", "--lease", "--lease-lifetime", "2s")
	if n := admittedAlternately(t, a, b, 30); n != 10 {
		t.Errorf("two leasing instances sharing PostgreSQL admitted %d of 30, want 10 (one burst)", n)
	}
	c := startServe(t, "--rules", rules, "--postgres", dsn, "--postgres-timeout", "10s")
	if n := admittedAlternately(t, c, c, 30); n != 10 {
		t.Errorf("an instance checking per call admitted %d of 30, want its own burst of 10 (leased buckets are apart)", n)
	}
}

// --lease needs a shared store, --redis or --postgres; with --postgres its
// lifetime is checked as with --redis.
func TestServeLeaseFlags(t *testing.T) {
	code, _, errs := runArgs("serve", "--lease", "--validate")
	if code != 2 || !strings.Contains(errs, "--lease, --lease-lifetime: only mean something with --redis or --postgres") {
		t.Errorf("--lease alone: exit %d, %q", code, errs)
	}
	code, _, errs = runArgs("serve", "--postgres", "postgres://u@127.0.0.1/db", "--lease-lifetime", "1ms", "--validate")
	for _, want := range []string{"--lease-lifetime: only means something with --lease", "--lease-lifetime: must be at least 10ms"} {
		if code != 2 || !strings.Contains(errs, want) {
			t.Errorf("--postgres with --lease-lifetime 1ms: exit %d, output lacks %q:\n%s", code, want, errs)
		}
	}
	if strings.Contains(errs, "only mean something with --redis") {
		t.Errorf("--postgres with lease flags is told they need --redis:\n%s", errs)
	}
}

// A schema installed before leases serves per-check limits as it did; only
// --lease needs the objects it lacks, and says so at start.
func TestServePostgresSchemaBeforeLeases(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.DSN()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := pgstore.Install(ctx, conn, pgstore.Schema{}); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`DROP FUNCTION faucet_buckets_release`, `DROP FUNCTION faucet_buckets_lease`,
		`DROP TABLE faucet_buckets_leases`, `DROP TABLE faucet_buckets_lease_buckets`} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm":"token_bucket",
	  "algorithm_config":{"rps":0.01,"burst":10},"fail_mode":"closed"}]}`)
	code, _, errs := runArgs("serve", "--rules", rules, "--postgres", dsn, "--lease", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(errs, "predates leases") || !strings.Contains(errs, "--postgres-install") {
		t.Errorf("--lease on a schema before leases: exit %d, %q; want a failed start naming the way out", code, errs)
	}
	a := startServe(t, "--rules", rules, "--postgres", dsn, "--postgres-timeout", "10s")
	if n := admittedAlternately(t, a, a, 20); n != 10 {
		t.Errorf("per check on a schema before leases: %d of 20 admitted, want 10", n)
	}
}
