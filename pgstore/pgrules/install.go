package pgrules

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// notifyName names the trigger and its function.
const notifyName = "faucet_rules_notify"

// Install creates the table (ParseTable's name) if it is missing, and
// (re)creates the trigger that notifies channel ("" is DefaultChannel) after
// every statement that changes it: INSERT, UPDATE, DELETE and TRUNCATE. An
// existing table is left as it is. Instances installing at once take turns.
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
	stmts := []string{
		// CREATE ... IF NOT EXISTS is not safe against itself.
		`SELECT pg_advisory_xact_lock(hashtext('faucet pgrules install'))`,
		`CREATE TABLE IF NOT EXISTS ` + t + ` (
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
)`,
		// One notification per statement, whatever the number of rows: a
		// reader re-reads the whole table anyway.
		`CREATE OR REPLACE FUNCTION ` + f + `() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME);
	RETURN NULL;
END
$$`,
		`DROP TRIGGER IF EXISTS ` + notifyName + ` ON ` + t,
		// ch is an identifier (checked), safe in a string literal.
		`CREATE TRIGGER ` + notifyName + ` AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ` + t +
			` FOR EACH STATEMENT EXECUTE FUNCTION ` + f + `('` + ch + `')`,
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgrules: install: %w", err)
	}
	defer tx.Rollback(context.Background())
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("pgrules: install %s: %w", t, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgrules: install %s: %w", t, err)
	}
	return nil
}
