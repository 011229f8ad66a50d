package pgstore

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DefaultTable is the table of a Config or Schema that leaves Table empty.
const DefaultTable = "faucet_buckets"

// tableName is what Table may be: a lower-case SQL identifier short enough
// that the functions named after it (Table + "_take_all") stay within
// PostgreSQL's 63 bytes.
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

func checkTable(t string) error {
	if !tableName.MatchString(t) {
		return invalid("Table must be a lower-case identifier of 1 to 48 letters, digits and '_', not starting with a digit, got %q", t)
	}
	return nil
}

// Schema describes the objects Install creates.
type Schema struct {
	// Table holds the buckets; "" picks DefaultTable. Install also creates
	// the functions Table_take and Table_take_all, which every decision
	// calls.
	Table string
	// Logged makes the table a logged one. By default it is UNLOGGED: its
	// writes skip the write-ahead log, which makes a take cheaper, and
	// after a crash of the server (not a clean restart) PostgreSQL empties
	// it, which leaves every bucket full, and it is not copied to
	// replicas. A rate limiter's state is worth little after a crash; a
	// logged table keeps it, and reaches replicas, at the price of a WAL
	// record per take. Install does not change an existing table's kind.
	Logged bool
}

// Install creates the bucket table and the functions that decide, if they do
// not exist, and replaces the functions if they do (their code may be
// newer); it is safe to run on every start, by several instances at once.
// The role needs the right to create them (or an administrator runs it once,
// then grants SELECT, INSERT, UPDATE, DELETE on the table and EXECUTE on the
// functions). It never drops or empties a table.
func Install(ctx context.Context, db DB, s Schema) error {
	if s.Table == "" {
		s.Table = DefaultTable
	}
	if err := checkTable(s.Table); err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: install: %w", err)
	}
	defer tx.Rollback(ctx)
	// Concurrent CREATE OR REPLACE FUNCTIONs of one name fail with "tuple
	// concurrently updated": instances that start together take turns.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('faucet pgstore install ' || $1))`, s.Table); err != nil {
		return fmt.Errorf("pgstore: install: %w", err)
	}
	for _, stmt := range schemaSQL(s) {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("pgstore: install %s: %w", s.Table, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: install: %w", err)
	}
	return nil
}

// Check reports whether table (DefaultTable if "") and the functions Install
// creates with it exist in db, so that a service finds out at start rather
// than at its first request; the error says what is missing, and names a
// schema installed before leases (two tables and two functions more: see
// NewLeased) as such.
func Check(ctx context.Context, db DB, table string) error {
	if table == "" {
		table = DefaultTable
	}
	if err := checkTable(table); err != nil {
		return err
	}
	var hasTable bool
	var funcs int
	err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
	(SELECT count(DISTINCT proname) FROM pg_proc WHERE proname IN ($2, $3, $4, $5, $6, $7) AND pg_function_is_visible(oid))`,
		ident(table), table+"_take", table+"_take_all", table+"_advance", table+"_full", table+"_period", table+"_slide").Scan(&hasTable, &funcs)
	if err != nil {
		return fmt.Errorf("pgstore: checking the schema of %s: %w", table, err)
	}
	if !hasTable || funcs != 6 {
		return fmt.Errorf("pgstore: table %s or its functions are missing (found the table: %v, %d of 6 functions): create them with Install (faucet serve --postgres-install) or the statements of SQL", table, hasTable, funcs)
	}
	return nil
}

// SQL returns the statements Install runs, for administrators who create
// the objects themselves.
func SQL(s Schema) (string, error) {
	if s.Table == "" {
		s.Table = DefaultTable
	}
	if err := checkTable(s.Table); err != nil {
		return "", err
	}
	return strings.Join(schemaSQL(s), ";\n\n") + ";\n", nil
}

// ident quotes a name for SQL.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// schemaSQL is the statements of sql/schema.sql, sql/lease_schema.sql and
// sql/slots_schema.sql for s: the bucket table and the functions that
// decide, then those of leases, then those of in-flight slots.
func schemaSQL(s Schema) []string {
	var out []string
	for _, file := range []string{"schema.sql", "lease_schema.sql", "slots_schema.sql"} {
		for _, st := range statementsOf(file) {
			out = append(out, render(st.text, s))
		}
	}
	return out
}
