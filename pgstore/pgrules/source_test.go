package pgrules_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newDB returns a pool on a new database of the shared server, and a
// function running SQL there.
func newDB(t *testing.T) (*pgxpool.Pool, func(sql string, args ...any)) {
	t.Helper()
	s := pgtest.Shared(t)
	dsn := s.NewDatabase(t)
	db, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db, func(sql string, args ...any) {
		t.Helper()
		if err := s.ExecDSN(dsn, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func names(rules []httplimit.Rule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Name)
	}
	return out
}

func TestSourceReadsActiveRows(t *testing.T) {
	db, exec := newDB(t)
	ctx := context.Background()
	src := &pgrules.Source{DB: db, Table: "Limits.RateLimitRule", Mapping: headerKeys}
	var re *pgrules.ReadError
	if _, err := src.Rules(ctx); !errors.As(err, &re) || !re.Missing() {
		t.Errorf("before Install: %v, want a ReadError for a missing table", err)
	}
	exec(`CREATE SCHEMA limits`)
	for range 2 { // Install again changes nothing
		if err := pgrules.Install(ctx, db, src.Table, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.Rules(ctx); err == nil || !strings.Contains(err.Error(), "no active rule") {
		t.Errorf("empty table: %v, want an error", err)
	}
	exec(`INSERT INTO limits.ratelimitrule (key_pattern, scope, rate_per_second, burst_capacity, plan, is_active) VALUES
		('user:{user_id}', 'user', 1, 10, NULL, true),
		('user:{user_id}', 'user', 10, 100, 'pro', true),
		('ip:{ip}', 'ip', 1, -5, NULL, true),
		('global', 'global', 100, 100, NULL, false)`)
	rules, err := src.Rules(ctx)
	if got, want := names(rules), []string{"rule-2", "rule-1"}; !slices.Equal(got, want) {
		t.Errorf("rules %q, want %q", got, want)
	}
	var rows *pgrules.RowsError
	if !errors.As(err, &rows) || !slices.Equal(rows.RuleIDs(), []int64{3}) || !strings.Contains(err.Error(), "rule 3: burst_capacity: must be between 1 and 1e9 tokens, got -5") {
		t.Errorf("err = %v, want row 3's burst", err)
	}
}

func TestParseTable(t *testing.T) {
	for _, tt := range []struct{ in, want, err string }{
		{"", `"ratelimitrule"`, ""},
		{"RateLimitRule", `"ratelimitrule"`, ""},
		{"app.rules_v2", `"app"."rules_v2"`, ""},
		{"a.b.c", "", "must be a name or schema.name"},
		{"rules; DROP TABLE x", "", "must be letters, digits and _"},
		{`"Rules"`, "", "must be letters, digits and _"},
		{"2rules", "", "not starting with a digit"},
		{strings.Repeat("r", 64), "", "at most 63 bytes, got 64"},
	} {
		id, err := pgrules.ParseTable(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseTable(%q) = %v, want an error with %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || id.Sanitize() != tt.want):
			t.Errorf("ParseTable(%q) = %s, %v, want %s", tt.in, id.Sanitize(), err, tt.want)
		}
	}
}

// waitFor waits for a delivery that holds, and fails after a generous
// minute: the machine may be loaded.
func waitFor(t *testing.T, got <-chan delivery, what string, ok func(delivery) bool) delivery {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case d := <-got:
			if ok(d) {
				return d
			}
		case <-deadline:
			t.Fatalf("no delivery with %s within a minute", what)
		}
	}
}

type delivery struct {
	rules []httplimit.Rule
	err   error
}
