package pgstore_test

import (
	"fmt"
	"strings"

	"github.com/faucetgo/faucet/pgstore"
)

// An administrator who creates the objects by hand reads them from SQL;
// here, the table.
func ExampleSQL() {
	sql, err := pgstore.SQL(pgstore.Schema{Table: "api_buckets"})
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.Split(sql, ";\n")[0])
	// Output:
	// CREATE UNLOGGED TABLE IF NOT EXISTS "api_buckets" (
	// 	key     bytea  PRIMARY KEY,
	// 	tick    bigint NOT NULL,
	// 	quanta  bigint NOT NULL,
	// 	expires bigint NOT NULL,
	// 	counts  bigint[]
	// ) WITH (fillfactor = 80)
}

// A configuration is checked before there is a database: the error names the
// field and its range.
func ExampleConfig_Check() {
	fmt.Println(pgstore.Config{Limit: 10, Burst: 50, Table: "Buckets"}.Check())
	fmt.Println(pgstore.Config{Limit: 10, Burst: 50, OnFailure: pgstore.Fallback, FallbackShare: 2}.Check())
	fmt.Println(pgstore.Config{Limit: 10, Burst: 50}.Check())
	// Output:
	// pgstore: invalid config: Table must be a lower-case identifier of 1 to 48 letters, digits and '_', not starting with a digit, got "Buckets"
	// pgstore: invalid config: FallbackShare must be in (0, 1] with OnFailure Fallback, got 2
	// <nil>
}
