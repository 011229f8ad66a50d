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
}

// errReply reports a reply that is not the scripts' array of integers.
var errReply = errors.New("redisstore: malformed reply")

type rueClient struct{ c rueidis.Client }

func (r rueClient) run(ctx context.Context, s script, keys, args []string) ([]int64, error) {
	return s.rue.Exec(ctx, r.c, keys, args).AsIntSlice()
}

func (r rueClient) sharded() bool { return r.c.Mode() == rueidis.ClientModeCluster }

type goRedisClient struct{ c redis.UniversalClient }

// sharded is false only for the one client type known to talk to one
// server (or a sentinel's primary): *redis.Client.
func (g goRedisClient) sharded() bool {
	_, single := g.c.(*redis.Client)
	return !single
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
