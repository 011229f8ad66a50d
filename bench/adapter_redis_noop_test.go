package bench

import (
	"context"

	"github.com/redis/rueidis"
)

// noopScript is the cheapest script a limiter could run: the ceiling of one
// EVALSHA round trip through a client, against which the limiters' scripts
// are measured. redis.sh measures the same script with redis-benchmark,
// the server's ceiling without any Go client.
const noopScript = "return 1"

var noopRueidisImpl = redisImpl{
	name: "noop_rueidis",
	new: func(addr string, _ limit, _ int) (redisCheck, func(), error) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			return nil, nil, err
		}
		s := rueidis.NewLuaScript(noopScript)
		check := func(ctx context.Context, _ string) (bool, error) {
			n, err := s.Exec(ctx, c, nil, nil).AsInt64()
			return n == 1, err
		}
		return check, c.Close, nil
	},
}
