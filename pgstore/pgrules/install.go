package pgrules

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// notifyName names the trigger and its function.
const notifyName = "faucet_rules_notify"

// Install creates the table (ParseTable's name) if it is missing, adds
// the calendar quota columns to a table that lacks them, drops a unique
// constraint on exactly (key_pattern, plan), which would keep two limits
// from sharing a key, and (re)creates the trigger that notifies channel
// ("" is DefaultChannel) after every statement that changes the table:
// INSERT, UPDATE, DELETE and TRUNCATE. The table's rows, and its other
// columns and constraints, are left as they are. All of it is one
// transaction; instances installing at once take turns.
func Install(ctx context.Context, db *pgxpool.Pool, table, channel string) error {
	id, err := ParseTable(table)
	if err != nil {
		return err
	}
	ch, err := channelName(channel)
	if err != nil {
		return err
	}
	fn := pgx.Identifier{notifyName}
	if len(id) == 2 {
		fn = pgx.Identifier{id[0], notifyName}
	}
	t, f := id.Sanitize(), fn.Sanitize()
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgrules: install: %w", err)
	}
	defer tx.Rollback(context.Background())
	exec := func(stmts ...string) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("pgrules: install %s: %w", t, err)
			}
		}
		return nil
	}
	if err := exec(
		// CREATE ... IF NOT EXISTS is not safe against itself.
		`SELECT pg_advisory_xact_lock(hashtext('faucet pgrules install'))`,
		// The seed's table, without its UNIQUE (key_pattern, plan): rows
		// sharing a key are the limits of one rule.
		`CREATE TABLE IF NOT EXISTS `+t+` (
	rule_id          BIGSERIAL PRIMARY KEY,
	key_pattern      VARCHAR(128)  NOT NULL,
	scope            VARCHAR(32)   NOT NULL,
	rate_per_second  FLOAT         NOT NULL,
	burst_capacity   INT           NOT NULL,
	plan             VARCHAR(32),
	is_active        BOOLEAN       NOT NULL DEFAULT TRUE,
	description      TEXT,
	created_at       TIMESTAMPTZ   NOT NULL DEFAULT NOW()
)`,
		`ALTER TABLE `+t+quotaColumnsDDL,
	); err != nil {
		return err
	}
	// The constraint's name is whatever the table was created with.
	rows, err := tx.Query(ctx, `SELECT c.conname FROM pg_constraint c
WHERE c.conrelid = $1::text::regclass AND c.contype = 'u'
  AND ARRAY(SELECT a.attname::text FROM pg_attribute a
            WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) ORDER BY a.attname) = ARRAY['key_pattern', 'plan']`, t)
	if err != nil {
		return fmt.Errorf("pgrules: install %s: %w", t, err)
	}
	unique, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgrules: install %s: %w", t, err)
	}
	for _, name := range unique {
		if err := exec(`ALTER TABLE ` + t + ` DROP CONSTRAINT ` + pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
	}
	if err := exec(
		// One notification per statement, whatever the number of rows: a
		// reader re-reads the whole table anyway.
		`CREATE OR REPLACE FUNCTION `+f+`() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME);
	RETURN NULL;
END
$$`,
		`DROP TRIGGER IF EXISTS `+notifyName+` ON `+t,
		// ch is an identifier (checked), safe in a string literal.
		`CREATE TRIGGER `+notifyName+` AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON `+t+
			` FOR EACH STATEMENT EXECUTE FUNCTION `+f+`('`+ch+`')`,
	); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgrules: install %s: %w", t, err)
	}
	return nil
}

// quotaColumnsDDL adds the columns of a calendar quota (Row.QuotaPeriod
// and after), NULL in a token bucket's row.
const quotaColumnsDDL = `
	ADD COLUMN IF NOT EXISTS quota_period   VARCHAR(8),
	ADD COLUMN IF NOT EXISTS time_zone      VARCHAR(64),
	ADD COLUMN IF NOT EXISTS anchor_month   SMALLINT,
	ADD COLUMN IF NOT EXISTS anchor_day     SMALLINT,
	ADD COLUMN IF NOT EXISTS anchor_weekday VARCHAR(9),
	ADD COLUMN IF NOT EXISTS anchor_hour    SMALLINT`
