package engine_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// A limiter for an API: 10 requests per second per user, bursts of 20.
func ExampleNew() {
	e, err := engine.New(engine.Config{Limit: 10, Burst: 20})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	if e.Allow("user:alice") {
		fmt.Println("serve alice")
	}
	// Output: serve alice
}

// Bad configuration is an error that names the field and its range.
func ExampleNew_invalid() {
	_, err := engine.New(engine.Config{Limit: 10, Burst: 0.5})
	fmt.Println(err)
	// Output: engine: invalid config: Burst must be between 1 and 1e9 tokens, got 0.5
}

// AllowAt takes the time as an argument: here a virtual clock that starts at
// the zero time, as a simulation or a test would use.
func ExampleEngine_AllowAt() {
	e, _ := engine.New(engine.Config{Limit: engine.Every(100 * time.Millisecond), Burst: 2, SweepInterval: -1})
	var clock time.Time
	for _, ms := range []int{0, 0, 0, 50, 100, 100} {
		d := e.AllowAt(clock.Add(time.Duration(ms)*time.Millisecond), "bob", 1)
		fmt.Printf("t=%3dms allowed=%-5v remaining=%.1f retry=%v\n", ms, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// t=  0ms allowed=true  remaining=1.0 retry=0s
	// t=  0ms allowed=true  remaining=0.0 retry=0s
	// t=  0ms allowed=false remaining=0.0 retry=100ms
	// t= 50ms allowed=false remaining=0.5 retry=50ms
	// t=100ms allowed=true  remaining=0.0 retry=0s
	// t=100ms allowed=false remaining=0.0 retry=100ms
}

// Weighted requests: an expensive call costs more tokens than a cheap one.
func ExampleEngine_AllowAt_weighted() {
	e, _ := engine.New(engine.Config{Limit: 1, Burst: 5, SweepInterval: -1})
	var clock time.Time
	fmt.Println(e.AllowAt(clock, "tenant", 4).Allowed)   // a batch export
	fmt.Println(e.AllowAt(clock, "tenant", 0.5).Allowed) // a cached read
	fmt.Println(e.AllowAt(clock, "tenant", 1).Allowed)   // 0.5 left: denied
	fmt.Println(e.AllowAt(clock, "tenant", 9).RetryAfter == engine.InfDuration)
	// Output:
	// true
	// true
	// false
	// true
}

func ExampleEvery() {
	fmt.Println(engine.Every(time.Second), engine.Every(250*time.Millisecond), engine.Every(time.Minute) < 0.017)
	// Output: 1 4 true
}

// Keys longer than MaxKeyBytes cost a bucket no more than short ones: they
// are stored as a 33-byte digest.
func ExampleBoundedKey() {
	huge := strings.Repeat("x", 1<<20)
	fmt.Println(len(engine.BoundedKey("user-42")), len(engine.BoundedKey(huge)))
	// Output: 7 33
}

// CheckLimit validates a limit without building an engine, with New's error.
func ExampleCheckLimit() {
	fmt.Println(engine.CheckLimit(10, 20))
	fmt.Println(engine.CheckLimit(10, 0.5))
	// Output:
	// <nil>
	// engine: invalid config: Burst must be between 1 and 1e9 tokens, got 0.5
}
