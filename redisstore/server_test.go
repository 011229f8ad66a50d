package redisstore

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/redisstore/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The tests run real redis-server processes on loopback (package
// redistest), each on its own free port and in its own temporary directory,
// and stop them at cleanup. Without the binary they skip, unless
// FAUCET_REQUIRE_REDIS=1 (as in CI): then a missing server fails them.

// signal sends sig to s or fails the test.
func signal(t testing.TB, s *redistest.Server, sig syscall.Signal) {
	t.Helper()
	if err := s.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// newRue returns a rueidis client for addrs, closed at cleanup.
func newRue(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  addrs,
		DisableCache: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newGoRedis returns a go-redis client for addr, closed at cleanup.
func newGoRedis(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// admin runs one command on addr with a fresh connection.
func admin(t testing.TB, addr string, args ...any) any {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 10 * time.Second})
	defer c.Close()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// newGoRedisNoT is a go-redis client without test cleanup, for probes.
func newGoRedisNoT(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
}
