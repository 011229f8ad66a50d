package pgaudit

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DefaultTable is the seed design's RateLimitViolation, spelled as
// PostgreSQL folds that unquoted name: a query that writes RateLimitViolation
// finds it.
const DefaultTable = "ratelimitviolation"

// ErrInvalidTable is wrapped by the error for a table name Install or
// NewWriter cannot use.
var ErrInvalidTable = errors.New("pgaudit: invalid table name")

// tableName is what a table name may be: a lower-case SQL identifier short
// enough that its index names (table + "_user_idx") fit PostgreSQL's 63
// bytes. Upper case is refused rather than folded: quoted, it would name
// another table than the same name unquoted in an operator's query.
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,53}$`)

func checkTable(t string) error {
	if !tableName.MatchString(t) {
		hint := ""
		if lower := strings.ToLower(t); lower != t && tableName.MatchString(lower) {
			hint = fmt.Sprintf(" (PostgreSQL folds unquoted names to lower case: %q)", lower)
		}
		return fmt.Errorf("%w: a lower-case identifier of 1 to 54 letters, digits and '_', not starting with a digit, got %q%s", ErrInvalidTable, t, hint)
	}
	return nil
}

// Schema describes the table Install creates.
type Schema struct {
	// Table is the table's name; "" picks DefaultTable.
	Table string
	// RulesTable, if set, is a table of rules with a rule_id column (such as
	// the seed design's RateLimitRule) that rule_id references, ON DELETE SET
	// NULL so that deleting a rule keeps its history (rule_name still names
	// it). Empty: rule_id is a plain BIGINT, and the audit log needs no rules
	// in the database. Install adds no reference to an existing table.
	RulesTable string
}

// DB is what Install needs: a *pgxpool.Pool or a *pgx.Conn.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Install creates the table and its indexes if they do not exist, and adds
// the columns rule_name and shadow to a table created from the seed design
// without them. It is safe to run on every start, by several instances at
// once; it never drops or empties anything.
func Install(ctx context.Context, db DB, s Schema) error {
	stmts, err := statements(s)
	if err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgaudit: install: %w", err)
	}
	defer tx.Rollback(ctx)
	// Concurrent CREATE TABLE IF NOT EXISTS of one name can still collide
	// (on its row type): instances that start together take turns.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('faucet pgaudit install ' || $1))`, tableOr(s.Table)); err != nil {
		return fmt.Errorf("pgaudit: install: %w", err)
	}
	for _, stmt := range stmts {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("pgaudit: install %s: %w", tableOr(s.Table), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgaudit: install: %w", err)
	}
	return nil
}

// SQL returns the statements Install runs, for administrators who create the
// table themselves.
func SQL(s Schema) (string, error) {
	stmts, err := statements(s)
	if err != nil {
		return "", err
	}
	return strings.Join(stmts, ";\n") + ";\n", nil
}

func tableOr(t string) string {
	if t == "" {
		return DefaultTable
	}
	return t
}

// statements are the seed design's table and indexes, then the columns it
// lacks.
func statements(s Schema) ([]string, error) {
	s.Table = tableOr(s.Table)
	if err := checkTable(s.Table); err != nil {
		return nil, err
	}
	ruleID := "BIGINT"
	if s.RulesTable != "" {
		if err := checkTable(s.RulesTable); err != nil {
			return nil, fmt.Errorf("RulesTable: %w", err)
		}
		ruleID += " REFERENCES " + pgx.Identifier{s.RulesTable}.Sanitize() + " (rule_id) ON DELETE SET NULL"
	}
	t := pgx.Identifier{s.Table}.Sanitize()
	// The seed's index names, for the seed's table; another table's are
	// its own, since index names are unique in a schema.
	userIdx, ipIdx := "idx_violation_user", "idx_violation_ip"
	if s.Table != DefaultTable {
		userIdx, ipIdx = s.Table+"_user_idx", s.Table+"_ip_idx"
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + t + ` (
    violation_id   BIGSERIAL PRIMARY KEY,
    bucket_key     VARCHAR(256)  NOT NULL,
    user_id        BIGINT,
    ip_address     INET,
    endpoint       VARCHAR(255),
    requested_at   TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    tokens_at_time FLOAT         NOT NULL,
    rule_id        ` + ruleID + `
)`,
		`CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{userIdx}.Sanitize() + ` ON ` + t + ` (user_id, requested_at DESC)`,
		`CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{ipIdx}.Sanitize() + ` ON ` + t + ` (ip_address, requested_at DESC)`,
		`ALTER TABLE ` + t + ` ADD COLUMN IF NOT EXISTS rule_name VARCHAR(64) NOT NULL DEFAULT '', ADD COLUMN IF NOT EXISTS shadow BOOLEAN NOT NULL DEFAULT false`,
	}, nil
}
