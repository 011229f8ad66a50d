package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// script is one Lua script as both clients run it: by EVALSHA, and by EVAL
// when the server answers NOSCRIPT (after a restart or SCRIPT FLUSH). A
// NOSCRIPT reply means the script did not run, so the retry takes nothing
// twice.
type script struct {
	rue *rueidis.Lua
	gor *redis.Script
}

func newScript(src string) script {
	return script{rue: rueidis.NewLuaScript(src), gor: redis.NewScript(src)}
}

var (
	takeEachLua = newScript(takeEachScript)
	takeLua     = newScript(takeScript)
	refundLua   = newScript(refundScript)
)

// client is what a Limiter needs from a connection: run a script and get its
// array of integers.
type client interface {
	run(ctx context.Context, s script, keys, args []string) ([]int64, error)
	// sharded reports a client that spreads keys over several servers (a
	// cluster's), where one script's keys must share a hash slot.
	sharded() bool
	// conn is the client value the Limiter was given: Limiters whose conns
	// are equal share a connection, and TakeAll decides them together.
	conn() any
	// unsent reports that err, from run, means the script did not run.
	unsent(err error) bool
}

// errReply reports a reply that is not the scripts' array of integers.
var errReply = errors.New("redisstore: malformed reply")

type rueClient struct{ c rueidis.Client }

func (r rueClient) run(ctx context.Context, s script, keys, args []string) ([]int64, error) {
	return s.rue.Exec(ctx, r.c, keys, args).AsIntSlice()
}

func (r rueClient) sharded() bool { return r.c.Mode() == rueidis.ClientModeCluster }

func (r rueClient) conn() any { return r.c }

// unsent trusts refused: rueidis makes one attempt at a script (it retries
// only read-only commands, and EVAL after NOSCRIPT, which did not run).
func (r rueClient) unsent(err error) bool { return refused(err) }

type goRedisClient struct{ c redis.UniversalClient }

// sharded is false only for the one client type known to talk to one
// server (or a sentinel's primary): *redis.Client.
func (g goRedisClient) sharded() bool {
	_, single := g.c.(*redis.Client)
	return !single
}

func (g goRedisClient) conn() any { return g.c }

// unsent trusts refused only for a *redis.Client that does not retry
// (Options.MaxRetries -1): go-redis retries a command whose connection
// failed, even after it was sent, and then returns the last attempt's
// error, a failed dial say, which tells nothing of the first.
func (g goRedisClient) unsent(err error) bool {
	c, ok := g.c.(*redis.Client)
	return ok && c.Options().MaxRetries == 0 && refused(err)
}

func (g goRedisClient) run(ctx context.Context, s script, keys, args []string) ([]int64, error) {
	v, err := s.gor.Run(ctx, g.c, keys, anyArgs(args)...).Result()
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T", errReply, v)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: element %d is %T", errReply, i, x)
		}
		out[i] = n
	}
	return out, nil
}

func anyArgs(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}
