package bench

import (
	"context"
	"runtime"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

var redisRateImpl = redisImpl{
	name: "redis_rate",
	new: func(addr string, lim limit, callers int) (redisCheck, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: goRedisPool(callers)})
		l := redis_rate.NewLimiter(rdb)
		rl := redis_rate.Limit{Rate: int(lim.rate), Burst: lim.burst, Period: time.Second}
		check := func(ctx context.Context, key string) (bool, error) {
			res, err := l.Allow(ctx, key, rl)
			if err != nil {
				return false, err
			}
			return res.Allowed > 0, nil
		}
		return check, func() { rdb.Close() }, nil
	},
}

// goRedisPool is the connection pool a go-redis client gets: its default (10
// per GOMAXPROCS) or one connection per caller if that is more, so that no
// caller of a go-redis based limiter waits for a free connection. go-redis
// sends one command per connection at a time; rueidis pipelines every
// caller's commands onto one connection and needs no such setting.
func goRedisPool(callers int) int {
	return max(callers, 10*runtime.GOMAXPROCS(0))
}
