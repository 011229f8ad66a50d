package pgrules_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seedDDL is the table as the seed creates it, before calendar quotas, with
// its UNIQUE (key_pattern, plan).
const seedDDL = `CREATE TABLE %s (
    rule_id          BIGSERIAL PRIMARY KEY,
    key_pattern      VARCHAR(128)  NOT NULL,
    scope            VARCHAR(32)   NOT NULL,
    rate_per_second  FLOAT         NOT NULL,
    burst_capacity   INT           NOT NULL,
    plan             VARCHAR(32),
    is_active        BOOLEAN       NOT NULL DEFAULT TRUE,
    description      TEXT,
    created_at       TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    %s
)`

// uniques lists the unique constraints of table, each as its sorted
// columns.
func uniques(t *testing.T, db *pgxpool.Pool, table string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT array_to_string(ARRAY(SELECT a.attname::text FROM pg_attribute a
		WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) ORDER BY a.attname), ',')
		FROM pg_constraint c WHERE c.conrelid = $1::text::regclass AND c.contype = 'u' ORDER BY 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Install upgrades a table made from the seed's DDL: it drops the unique
// constraint on (key_pattern, plan), whatever its name, keeps other ones,
// and adds the quota columns; then two rows may share a pattern and plan,
// and become one rule.
func TestInstallUpgradesSeedTable(t *testing.T) {
	for _, tc := range []struct {
		table, unique string
		kept          []string
	}{
		{"ratelimitrule", "UNIQUE (key_pattern, plan)", nil},
		{"app.rules", "CONSTRAINT one_row_per_plan UNIQUE (plan, key_pattern), UNIQUE (key_pattern, plan, rate_per_second)", []string{"key_pattern,plan,rate_per_second"}},
	} {
		t.Run(tc.table, func(t *testing.T) {
			db, exec := newDB(t)
			ctx := context.Background()
			exec(`CREATE SCHEMA app`)
			exec(strings.Replace(strings.Replace(seedDDL, "%s", tc.table, 1), "%s", tc.unique, 1))
			exec(`INSERT INTO ` + tc.table + ` (rule_id, key_pattern, scope, rate_per_second, burst_capacity, plan) VALUES
				(1, 'ip:{ip}', 'ip', 1, 10, 'pro')`)
			if err := execErr(db, `INSERT INTO `+tc.table+` (rule_id, key_pattern, scope, rate_per_second, burst_capacity, plan) VALUES
				(2, 'ip:{ip}', 'ip', 0, 1000, 'pro')`); err == nil {
				t.Fatal("before Install, the seed's constraint took a second row for (ip:{ip}, pro)")
			}
			src := &pgrules.Source{DB: db, Table: tc.table, Mapping: headerKeys}
			// Without the quota columns, the rows are token buckets.
			if rules, err := src.Rules(ctx); err != nil || !slices.Equal(names(rules), []string{"rule-1"}) {
				t.Errorf("before Install: rules %q, %v; want rule-1", names(rules), err)
			}
			for range 2 { // Install again changes nothing
				if err := pgrules.Install(ctx, db, tc.table, ""); err != nil {
					t.Fatal(err)
				}
			}
			if got := uniques(t, db, tc.table); !slices.Equal(got, tc.kept) && len(got)+len(tc.kept) > 0 {
				t.Errorf("unique constraints after Install: %q, want %q", got, tc.kept)
			}
			exec(`INSERT INTO ` + tc.table + ` (rule_id, key_pattern, scope, rate_per_second, burst_capacity, plan, quota_period, time_zone, anchor_day) VALUES
				(2, 'ip:{ip}', 'ip', 0, 1000, 'pro', 'month', 'Europe/Berlin', 15)`)
			rules, err := src.Rules(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []httplimit.Rule{{Name: "group-1", LimitKeys: []string{"ip:address"}, Match: map[string][]string{"header:x-plan": {"pro"}},
				Limits: []httplimit.Limit{{Name: "rule-1", Rate: 1, Burst: 10},
					{Name: "rule-2", Quota: 1000, Period: "month", TimeZone: "Europe/Berlin", Anchor: httplimit.Anchor{Day: 15}}}}}
			if !rulesEqual(rules, want) {
				t.Errorf("\n got %+v\nwant %+v", rules, want)
			}
		})
	}
}

// A new table has no unique constraint but its primary key.
func TestInstallNewTableTakesRowsSharingAKey(t *testing.T) {
	db, exec := newDB(t)
	if err := pgrules.Install(context.Background(), db, "", ""); err != nil {
		t.Fatal(err)
	}
	if got := uniques(t, db, "ratelimitrule"); len(got) != 0 {
		t.Errorf("unique constraints: %q, want none", got)
	}
	exec(`INSERT INTO ratelimitrule (key_pattern, scope, rate_per_second, burst_capacity, plan, quota_period, anchor_weekday, anchor_hour) VALUES
		('user:{id}', 'user', 10, 10, 'pro', NULL, NULL, NULL),
		('user:{id}', 'user', 0, 500, 'pro', 'week', 'sunday', 6)`)
	rules, err := (&pgrules.Source{DB: db, Mapping: headerKeys}).Rules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || len(rules[0].Limits) != 2 || rules[0].Limits[1].Anchor != (httplimit.Anchor{Weekday: "sunday", Hour: 6}) {
		t.Errorf("rules %+v, want one rule with a per-second limit and a weekly quota from Sunday 6:00", rules)
	}
}

func execErr(db *pgxpool.Pool, sql string) error {
	_, err := db.Exec(context.Background(), sql)
	return err
}
