package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"
)

var heartbeatLua = newScript(heartbeatScript)

// heartbeatWindow is how long an instance counts as alive after its last
// heartbeat, in heartbeats: one or two lost to a slow moment do not make it
// vanish.
const heartbeatWindow = 5

// instancesKey is the key of the store's heartbeats: the Prefix and a name
// with a space, which no Spec ID holds, so that no bucket's key is it.
func instancesKey(prefix string) string { return prefix + " instances" }

// heartbeat returns the Beat of an instance of the store under prefix,
// beating every `every`.
func heartbeat(c client, prefix string, every time.Duration) func(context.Context) (int, error) {
	var id [8]byte
	rand.Read(id[:])
	args := []string{hex.EncodeToString(id[:]), strconv.FormatInt((heartbeatWindow * every).Microseconds(), 10)}
	keys := []string{instancesKey(prefix)}
	return func(ctx context.Context) (int, error) {
		v, err := c.run(ctx, heartbeatLua, keys, args)
		if err != nil {
			return 0, err
		}
		if len(v) != 1 {
			return 0, errReply
		}
		return int(v[0]), nil
	}
}
