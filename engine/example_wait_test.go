package engine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// A batch job that must not call an API more than 100 times a second waits
// for its tokens instead of failing.
func ExampleEngine_WaitN() {
	e, _ := engine.New(engine.Config{Limit: 100, Burst: 10})
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	start := time.Now()
	for range 20 {
		if err := e.Wait(ctx, "api"); err != nil {
			fmt.Println(err)
			return
		}
	}
	// 10 at once from the burst, then one every 10 ms.
	fmt.Println(time.Since(start) >= 100*time.Millisecond)

	// A deadline the tokens cannot meet is an error at once: 10 tokens
	// take 10 s to come back at 1 per second.
	slow, _ := engine.New(engine.Config{Limit: 1, Burst: 10})
	defer slow.Close()
	slow.AllowN("report", 10)
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	defer cancelShort()
	err := slow.WaitN(short, "report", 10)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// true
	// true
}

// Reservations on a virtual clock: each is served when its tokens come, in
// the order they were made, and a take cannot jump the queue.
func ExampleEngine_ReserveN() {
	e, _ := engine.New(engine.Config{Limit: 10, Burst: 1, SweepInterval: -1})
	var clock time.Time
	for range 3 {
		r := e.ReserveN(clock, "job", 1)
		fmt.Println("act in", r.DelayFrom(clock))
	}
	d := e.AllowAt(clock.Add(150*time.Millisecond), "job", 1)
	fmt.Println("take at 150ms:", d.Allowed, "retry in", d.RetryAfter)
	// Output:
	// act in 0s
	// act in 100ms
	// act in 200ms
	// take at 150ms: false retry in 150ms
}
