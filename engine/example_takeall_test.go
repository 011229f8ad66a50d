package engine_test

import (
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Per-user and global limits that must both pass: when the global limit
// denies, the user's token is given back.
func ExampleEngine_TakeAllAt() {
	perUser, _ := engine.New(engine.Config{Limit: 1, Burst: 2, SweepInterval: -1})
	global, _ := engine.New(engine.Config{Limit: 1, Burst: 3, SweepInterval: -1})
	var clock time.Time
	out := make([]engine.Decision, 2)
	for _, user := range []string{"ann", "ann", "bob", "bob"} {
		takes := []engine.Take{{Limiter: perUser, Key: user, N: 1}, {Limiter: global, Key: "", N: 1}}
		denied, err := global.TakeAllAt(clock, takes, out)
		if err != nil {
			panic(err) // a nil or foreign limiter, or a short out
		}
		fmt.Printf("%s: denied by %d, %s holds %v, global %v\n", user, denied, user, out[0].Remaining, out[1].Remaining)
	}
	// Output:
	// ann: denied by -1, ann holds 1, global 2
	// ann: denied by -1, ann holds 0, global 1
	// bob: denied by -1, bob holds 1, global 0
	// bob: denied by 1, bob holds 1, global 0
}
