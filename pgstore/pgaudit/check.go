package pgaudit

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Querier is what Check needs: a *pgxpool.Pool or a *pgx.Conn.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check reports whether the table (DefaultTable if "") exists with the
// columns a Writer writes, so that a service finds out at start rather than
// in a queue of denials that can never be written; the error says what is
// missing and how to create it.
func Check(ctx context.Context, db Querier, table string) error {
	table = tableOr(table)
	if err := checkTable(table); err != nil {
		return err
	}
	var exists bool
	var cols int
	err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
	(SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1) AND NOT attisdropped AND attname = ANY($2))`,
		pgx.Identifier{table}.Sanitize(), columns).Scan(&exists, &cols)
	if err != nil {
		return fmt.Errorf("pgaudit: checking table %s: %w", table, err)
	}
	if !exists || cols != len(columns) {
		return fmt.Errorf("pgaudit: table %s is missing or lacks columns (found the table: %v, %d of its %d columns): create it with Install (faucet serve --audit-install) or the statements of SQL",
			table, exists, cols, len(columns))
	}
	return nil
}
