package main

import (
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// redisFlags are serve's flags for a shared Redis store.
type redisFlags struct {
	addrs   string
	timeout time.Duration
	prefix  string
	tls     bool
}

const (
	defaultRedisTimeout = 100 * time.Millisecond
	defaultRedisPrefix  = "faucet:"
)

func (f *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addrs, "redis", "", "keep buckets in Redis at host:port `ADDR` (a comma list: seeds of a Redis Cluster), shared by every instance")
	fs.DurationVar(&f.timeout, "redis-timeout", defaultRedisTimeout, "longest wait for Redis per request before the rule's fail_mode applies")
	fs.StringVar(&f.prefix, "redis-prefix", defaultRedisPrefix, "prefix of every Redis key; instances share buckets only with the same prefix")
	fs.BoolVar(&f.tls, "redis-tls", false, "connect to Redis over TLS")
}

// problems lists what is wrong with the Redis flags.
func (f *redisFlags) problems() []string {
	var problems []string
	if f.addrs == "" {
		if f.timeout != defaultRedisTimeout || f.prefix != defaultRedisPrefix || f.tls {
			problems = append(problems, "--redis-timeout, --redis-prefix, --redis-tls: only mean something with --redis")
		}
		return problems
	}
	for _, a := range f.list() {
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			problems = append(problems, fmt.Sprintf("--redis: %q is not host:port with a port from 1 to 65535", a))
		}
	}
	if f.timeout <= 0 {
		problems = append(problems, fmt.Sprintf("--redis-timeout: must be positive, got %v", f.timeout))
	}
	if f.prefix == "" {
		problems = append(problems, "--redis-prefix: must not be empty")
	}
	return problems
}

// list splits --redis into its addresses.
func (f *redisFlags) list() []string {
	var out []string
	for a := range strings.SplitSeq(f.addrs, ",") {
		out = append(out, strings.TrimSpace(a))
	}
	return out
}

// newStore builds the bucket store serve runs on, and the function that
// closes it on shutdown. Every store option of serve is decided here.
func newStore(cfg *serveConfig) (httplimit.Store, func() error, error) {
	s := httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxKeys: cfg.maxKeys})
	return s, s.Close, nil
}
