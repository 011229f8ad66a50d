package pgstore

import (
	"context"
	"fmt"
	"strings"
)

// leaseTables and leaseFuncs are the names of the tables and functions leases add to a
// schema, after Table.
var leaseTables, leaseFuncs = []string{"_lease_buckets", "_leases"}, []string{"_lease", "_release"}

// CheckLeases reports whether the objects that leased limiters need
// (NewLeased, StoreOptions.Lease) exist beside table (DefaultTable if "")
// in db, as Check does for per-check ones, which it checks first. A schema
// that Install created before leases existed lacks them, and Install adds
// them, keeping every bucket; until then the per-check limiters work.
func CheckLeases(ctx context.Context, db DB, table string) error {
	if table == "" {
		table = DefaultTable
	}
	if err := Check(ctx, db, table); err != nil {
		return err
	}
	var regs, tables, names []string
	for _, t := range leaseTables {
		regs, tables = append(regs, ident(table+t)), append(tables, table+t)
	}
	for _, f := range leaseFuncs {
		names = append(names, table+f)
	}
	var missing []string
	err := db.QueryRow(ctx, `SELECT coalesce(array_agg(x.n ORDER BY x.o), '{}') FROM (
	SELECT n, o FROM unnest($1::text[], $2::text[]) WITH ORDINALITY u(r, n, o) WHERE to_regclass(r) IS NULL
	UNION ALL
	SELECT f, 10 + o FROM unnest($3::text[]) WITH ORDINALITY u(f, o)
		WHERE NOT EXISTS (SELECT 1 FROM pg_proc WHERE proname = f AND pg_function_is_visible(oid))) x`,
		regs, tables, names).Scan(&missing)
	if err != nil {
		return fmt.Errorf("pgstore: checking the lease schema of %s: %w", table, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("pgstore: the schema of table %s predates leases (missing %s): run Install again (faucet serve --postgres-install) or the statements of SQL; it adds them and keeps every bucket", table, strings.Join(missing, ", "))
	}
	return nil
}
