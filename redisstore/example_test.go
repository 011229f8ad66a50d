package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore"
	"github.com/redis/rueidis"
)

// server starts miniredis, an in-process Redis whose clock stands still, so
// that the examples need no server and print the same every time; in
// production the client points at Redis or Valkey.
func server() (rueidis.Client, func()) {
	srv, _ := miniredis.Run()
	srv.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true, ForceSingleClient: true})
	return client, func() { client.Close(); srv.Close() }
}

func Example() {
	client, stop := server()
	defer stop()

	l, err := redisstore.New(client, redisstore.Config{Limit: 1, Burst: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	ctx := context.Background()
	for range 4 {
		d, err := l.Take(ctx, "user42", 1)
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter, err)
	}
	// Output:
	// true 2 0s <nil>
	// true 1 0s <nil>
	// true 0 0s <nil>
	// false 0 1s <nil>
}

// TakeAll over a user's bucket and its tenant's: keys with one hash tag
// share a Redis Cluster slot, so the call is one atomic script.
func ExampleLimiter_TakeAll() {
	client, stop := server()
	defer stop()

	users, _ := redisstore.New(client, redisstore.Config{Limit: 10, Burst: 10, Prefix: "user:"})
	tenants, _ := redisstore.New(client, redisstore.Config{Limit: 1, Burst: 2, Prefix: "tenant:"})
	takes := []engine.Take{
		{Limiter: users, Key: "{acme}:alice", N: 1},
		{Limiter: tenants, Key: "{acme}", N: 1},
	}
	out := make([]engine.Decision, len(takes))
	for range 3 {
		denied, err := users.TakeAll(context.Background(), takes, out)
		fmt.Println(denied, out[0].Remaining, out[1].Remaining, err)
	}
	// Output:
	// -1 9 1 <nil>
	// -1 8 0 <nil>
	// 1 8 0 <nil>
}

func ExampleConfig_errors() {
	_, err := redisstore.New(nil, redisstore.Config{Limit: 10, Burst: 20, Timeout: -1})
	fmt.Println(err)
	_, err = redisstore.New(nil, redisstore.Config{Limit: 10, Burst: 0.5})
	fmt.Println(errors.Is(err, redisstore.ErrInvalidConfig), errors.Is(err, engine.ErrInvalidConfig))
	// Output:
	// redisstore: invalid config: Timeout must be 0 (default 100ms) or positive, got -1ns
	// true true
}
