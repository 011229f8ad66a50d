package pgstore

import (
	"context"
)

// WarmConn readies a new connection for takes on table (DefaultTable if
// ""): one peek through each take function, which writes and locks
// nothing, so that the server compiles the functions in this backend and
// the driver prepares the statements Limiters send, before a check waits
// on either. Give it to the pool as its AfterConnect hook (ignoring its
// error where the functions may not exist yet: the connection is fine):
// under a burst of new keys a pool grows, and the first take on a cold
// connection otherwise costs a few round trips more, enough on a loaded
// machine to miss a check's deadline.
func WarmConn(ctx context.Context, db DB, table string) error {
	if table == "" {
		table = DefaultTable
	}
	if err := checkTable(table); err != nil {
		return err
	}
	take, takeAll := takeSQL(table)
	var nowUS int64
	var den []bool
	var at, q []int64
	peek := [][]byte{{}}
	if err := db.QueryRow(ctx, take, peek, int64(1000), "1", "1000000", []int64{0}, int32(1), (*int64)(nil)).Scan(&nowUS, &den, &at, &q); err != nil {
		return err
	}
	var k int32
	return db.QueryRow(ctx, takeAll, peek, []int64{1000}, []string{"1"}, []string{"1000000"}, []int64{0}, int32(1), (*int64)(nil)).Scan(&nowUS, &k, &at, &q)
}
