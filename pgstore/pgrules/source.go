package pgrules

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Source reads the rules from the table: an httplimit.RuleSource.
type Source struct {
	// DB is where the table is.
	DB *pgxpool.Pool
	// Table is the table's name (see ParseTable); "" is DefaultTable.
	Table string
	// Mapping turns rows into rules.
	Mapping Mapping
	// Options are those the rules will run under; the rows are checked
	// against them (rows reading JWT claims need Options.JWT).
	Options httplimit.Options
}

var _ httplimit.RuleSource = (*Source)(nil)

// Rules reads the active rows and maps them (Mapping.Rules): the usable
// rules, with a *RowsError for the rows left out. An error without rules
// means nothing usable was read: the table could not be (a *ReadError), or
// has no active row, or none that maps.
func (s *Source) Rules(ctx context.Context) ([]httplimit.Rule, error) {
	id, err := ParseTable(s.Table)
	if err != nil {
		return nil, err
	}
	rows, err := s.read(ctx, id)
	if err != nil {
		return nil, &ReadError{Table: id.Sanitize(), Err: err}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("pgrules: table %s has no active rule", id.Sanitize())
	}
	return s.Mapping.Rules(rows, s.Options)
}

func (s *Source) read(ctx context.Context, id pgx.Identifier) ([]Row, error) {
	// A table made before calendar quotas lacks their columns until
	// Install adds them; it holds token buckets only, read as such. A
	// missing table has no columns here, and fails the SELECT.
	names, err := s.DB.Query(ctx, `SELECT attname::text FROM pg_attribute
WHERE attrelid = to_regclass($1::text) AND attnum > 0 AND NOT attisdropped AND attname = ANY ($2)`, id.Sanitize(), quotaColumnNames)
	if err != nil {
		return nil, err
	}
	present, err := pgx.CollectRows(names, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	cols := make([]string, len(quotaColumnNames))
	for i, c := range quotaColumnNames {
		cols[i] = c
		if !slices.Contains(present, c) {
			cols[i] = "NULL::" + quotaColumnTypes[i]
		}
	}
	q := `SELECT rule_id, key_pattern, scope, rate_per_second, burst_capacity, plan, ` + strings.Join(cols, ", ") +
		` FROM ` + id.Sanitize() + ` WHERE is_active`
	rows, err := s.DB.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var row Row
		err := r.Scan(&row.RuleID, &row.KeyPattern, &row.Scope, &row.RatePerSecond, &row.BurstCapacity, &row.Plan,
			&row.QuotaPeriod, &row.TimeZone, &row.AnchorMonth, &row.AnchorDay, &row.AnchorWeekday, &row.AnchorHour)
		return row, err
	})
}

// quotaColumnNames are the calendar quota columns (quotaColumnsDDL), in
// the order read scans them.
var (
	quotaColumnNames = []string{"quota_period", "time_zone", "anchor_month", "anchor_day", "anchor_weekday", "anchor_hour"}
	quotaColumnTypes = []string{"text", "text", "smallint", "smallint", "text", "smallint"}
)

// ReadError is a failure to read the table: the database is unreachable,
// or the table is missing or lacks a column.
type ReadError struct {
	Table string
	Err   error
}

func (e *ReadError) Error() string { return "pgrules: reading " + e.Table + ": " + e.Err.Error() }

// Missing reports whether the table does not exist (Install creates it).
func (e *ReadError) Missing() bool {
	var pe *pgconn.PgError
	return errors.As(e.Err, &pe) && pe.Code == "42P01" // undefined_table
}

func (e *ReadError) Unwrap() error { return e.Err }
