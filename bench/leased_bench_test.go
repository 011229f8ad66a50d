package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore"
)

// leasedLimit is the limit of BenchmarkLeased: as high as the engine goes,
// so that even checks decided in memory, at tens of millions a second on
// one key, never meet it.
var leasedLimit = limit{rate: 1e9, burst: 1e9}

// BenchmarkLeased checks a limit shared through one local Redis on few keys,
// where one limit is hot from every caller: one global limit (keys=1) and a
// hundred tenants (keys=100), from 1, 16 and 64 callers. faucet_leased is
// redisstore's Leased limiter (checks decided in memory from leases of the
// shared buckets), faucet redisstore per check, redis_rate its peer, and
// engine the in-memory engine with no Redis at all: the floor. scripts/op
// is what reached Redis per check; 1 - scripts/op is the share decided
// locally.
func BenchmarkLeased(b *testing.B) {
	for _, nkeys := range []int{1, 100} {
		keys := keys13(nkeys)
		seq := uniformSeq(nkeys)
		for _, im := range []redisImpl{faucetLeasedImpl, faucetRedisImpl, redisRateImpl, engineImpl} {
			for _, callers := range redisCallers {
				b.Run(fmt.Sprintf("keys=%d/impl=%s/callers=%d", nkeys, im.name, callers), func(b *testing.B) {
					benchRedisImpl(b, im, leasedLimit, callers, keys, seq)
				})
			}
		}
	}
}

// faucetLeasedImpl is redisstore's Leased limiter, with its default lease
// options, on rueidis.
var faucetLeasedImpl = redisImpl{
	name: "faucet_leased",
	new: func(addr string, lim limit, _ int) (redisCheck, func(), error) {
		l, closeLimiter, err := rueLimiter(addr, lim)
		if err != nil {
			return nil, nil, err
		}
		s, err := redisstore.NewLeased(l, redisstore.LeaseOptions{})
		if err != nil {
			closeLimiter()
			return nil, nil, err
		}
		check := func(ctx context.Context, key string) (bool, error) {
			d, err := s.Take(ctx, key, 1)
			return d.Allowed, err
		}
		return check, func() { s.Close(); closeLimiter() }, nil
	},
}

// engineImpl is the engine alone, in memory: what a check costs with no
// shared store.
var engineImpl = redisImpl{
	name: "engine",
	new: func(_ string, lim limit, _ int) (redisCheck, func(), error) {
		e, err := engine.New(engine.Config{Limit: engine.Limit(lim.rate), Burst: float64(lim.burst)})
		if err != nil {
			return nil, nil, err
		}
		check := func(_ context.Context, key string) (bool, error) {
			return e.AllowN(key, 1).Allowed, nil
		}
		return check, func() { e.Close() }, nil
	},
}
