package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// An instance's heartbeat is a row of the bucket table, apart from every
// bucket: its key is the store's Prefix, " instances ", and an id random to
// the Store (a bucket's key continues the Prefix with a quoted Spec ID,
// which starts with '"'). Its expires is the store's clock plus the window,
// so Sweep removes the rows of instances gone for longer; a row whose time
// has passed no longer counts, swept or not.
const instancesTag = " instances "

// heartbeatWindow is how long an instance counts as alive after its last
// heartbeat, in heartbeats: one or two lost to a slow moment do not make it
// vanish.
const heartbeatWindow = 5

// heartbeat returns the Beat of an instance of the store under prefix in
// table, beating every `every`.
func heartbeat(db DB, table, prefix string, every time.Duration) func(context.Context) (int, error) {
	var id [8]byte
	rand.Read(id[:])
	key := []byte(prefix + instancesTag + hex.EncodeToString(id[:]))
	lo := []byte(prefix + instancesTag)
	// The first key after every key that starts with lo.
	hi := append([]byte(prefix+instancesTag[:len(instancesTag)-1]), instancesTag[len(instancesTag)-1]+1)
	sql := render(statementText("background.sql", "heartbeat"), Schema{Table: table})
	window := (heartbeatWindow * every).Microseconds()
	return func(ctx context.Context) (int, error) {
		var n int64
		if err := db.QueryRow(ctx, sql, key, lo, hi, window).Scan(&n); err != nil {
			return 0, err
		}
		return int(n), nil
	}
}
