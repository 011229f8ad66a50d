package pgaudit_test

import (
	"fmt"

	"github.com/faucetgo/faucet/pgstore/pgaudit"
)

// SQL gives the statements Install runs, for an administrator who creates
// the table: the seed design's, then the two columns it lacks.
func ExampleSQL() {
	sql, err := pgaudit.SQL(pgaudit.Schema{})
	if err != nil {
		panic(err)
	}
	fmt.Print(sql)
	// Output:
	// CREATE TABLE IF NOT EXISTS "ratelimitviolation" (
	//     violation_id   BIGSERIAL PRIMARY KEY,
	//     bucket_key     VARCHAR(256)  NOT NULL,
	//     user_id        BIGINT,
	//     ip_address     INET,
	//     endpoint       VARCHAR(255),
	//     requested_at   TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
	//     tokens_at_time FLOAT         NOT NULL,
	//     rule_id        BIGINT
	// );
	// CREATE INDEX IF NOT EXISTS "idx_violation_user" ON "ratelimitviolation" (user_id, requested_at DESC);
	// CREATE INDEX IF NOT EXISTS "idx_violation_ip" ON "ratelimitviolation" (ip_address, requested_at DESC);
	// ALTER TABLE "ratelimitviolation" ADD COLUMN IF NOT EXISTS rule_name VARCHAR(64) NOT NULL DEFAULT '', ADD COLUMN IF NOT EXISTS shadow BOOLEAN NOT NULL DEFAULT false;
}
