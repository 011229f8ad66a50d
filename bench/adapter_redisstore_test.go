package bench

import (
	"context"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// redisConfig is faucet's Config for the Redis benchmarks. The deadline is
// generous so that a slow moment of a loaded machine shows in the latency
// figures rather than as a failed (and then fail-open) check.
func redisConfig(lim limit) redisstore.Config {
	return redisstore.Config{Limit: engine.Limit(lim.rate), Burst: float64(lim.burst), Timeout: time.Second}
}

// faucetRedisImpl is redisstore on its default client, rueidis with its
// default options.
var faucetRedisImpl = redisImpl{
	name: "faucet",
	new: func(addr string, lim limit, _ int) (redisCheck, func(), error) {
		l, closeFn, err := rueLimiter(addr, lim)
		if err != nil {
			return nil, nil, err
		}
		return redisstoreCheck(l), closeFn, nil
	},
}

// rueLimiter is a redisstore Limiter on a rueidis client of its own, with
// the function that closes both.
func rueLimiter(addr string, lim limit) (*redisstore.Limiter, func(), error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return nil, nil, err
	}
	l, err := redisstore.New(c, redisConfig(lim))
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return l, func() { l.Close(); c.Close() }, nil
}

// faucetGoRedisImpl is redisstore on a go-redis client with the pool
// redis_rate gets, to separate the script from the client.
var faucetGoRedisImpl = redisImpl{
	name: "faucet_goredis",
	new: func(addr string, lim limit, callers int) (redisCheck, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: goRedisPool(callers)})
		l, err := redisstore.NewGoRedis(rdb, redisConfig(lim))
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return redisstoreCheck(l), func() { l.Close(); rdb.Close() }, nil
	},
}

func redisstoreCheck(l *redisstore.Limiter) redisCheck {
	return func(ctx context.Context, key string) (bool, error) {
		d, err := l.Take(ctx, key, 1)
		return d.Allowed, err
	}
}
