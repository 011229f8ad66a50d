package settings

import (
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/faucetgo/faucet/redisstore"
)

// Redis are serve's flags for a shared Redis store, and the lease flags,
// which --postgres shares.
type Redis struct {
	Addrs   string
	Timeout time.Duration
	Prefix  string
	TLS     bool
	Share   float64
	// Lease, with LeaseLife, makes every rule's limiter a leased one.
	Lease     bool
	LeaseLife time.Duration
}

// serve's Redis flags default to the store's own defaults.
const (
	defaultRedisTimeout = redisstore.DefaultTimeout
	defaultRedisPrefix  = redisstore.DefaultStorePrefix
)

func (f *Redis) register(fs *flag.FlagSet) {
	fs.StringVar(&f.Addrs, "redis", "", "keep buckets in Redis at host:port `ADDR` (a comma list: seeds of a Redis Cluster), shared by every instance")
	fs.DurationVar(&f.Timeout, "redis-timeout", defaultRedisTimeout, "longest wait for Redis per request before the in-memory fallback (or the rule's fail_mode) decides")
	fs.StringVar(&f.Prefix, "redis-prefix", defaultRedisPrefix, "prefix of every Redis key; instances share buckets only with the same prefix")
	fs.BoolVar(&f.TLS, "redis-tls", false, "connect to Redis over TLS")
	fs.Float64Var(&f.Share, "redis-fallback-share", 0, "while Redis fails, decide in memory at this `SHARE` of each rule's rate and burst, in (0, 1] (0: 1/N, N the instances sharing Redis, counted by their heartbeats)")
	fs.BoolVar(&f.Lease, "lease", false, "decide most checks in memory from leases of the shared buckets in Redis or PostgreSQL (every instance must lease, or none: leased buckets are apart from per-check ones)")
	fs.DurationVar(&f.LeaseLife, "lease-lifetime", time.Second, "how long a lease lasts; tokens left in a lease whose instance dies are lost for this long at most")
}

// problems lists what is wrong with the Redis flags, and the lease flags,
// which --postgres (its DSN) shares.
func (f *Redis) problems(postgres string) []string {
	var problems []string
	if f.Addrs == "" {
		if f.Timeout != defaultRedisTimeout || f.Prefix != defaultRedisPrefix || f.TLS || f.Share != 0 {
			problems = append(problems, "--redis-timeout, --redis-prefix, --redis-tls, --redis-fallback-share: only mean something with --redis")
		}
		if postgres == "" {
			if f.Lease || f.LeaseLife != time.Second {
				problems = append(problems, "--lease, --lease-lifetime: only mean something with --redis or --postgres")
			}
			return problems
		}
		return append(problems, f.leaseProblems()...)
	}
	for _, a := range f.List() {
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			problems = append(problems, fmt.Sprintf("--redis: %q is not host:port with a port from 1 to 65535", a))
		}
	}
	if f.Timeout <= 0 {
		problems = append(problems, fmt.Sprintf("--redis-timeout: must be positive, got %v", f.Timeout))
	}
	if f.Prefix == "" || strings.ContainsAny(f.Prefix, "{}") {
		problems = append(problems, fmt.Sprintf("--redis-prefix: must be non-empty, without '{' or '}', got %q", f.Prefix))
	}
	if !(f.Share >= 0 && f.Share <= 1) {
		problems = append(problems, fmt.Sprintf("--redis-fallback-share: must be in (0, 1], or 0 for 1/instances, got %v", f.Share))
	}
	return append(problems, f.leaseProblems()...)
}

// leaseProblems lists what is wrong with the lease flags, given a store.
func (f *Redis) leaseProblems() []string {
	var problems []string
	if f.LeaseLife != time.Second && !f.Lease {
		problems = append(problems, "--lease-lifetime: only means something with --lease")
	}
	if f.LeaseLife < 10*time.Millisecond {
		problems = append(problems, fmt.Sprintf("--lease-lifetime: must be at least 10ms, got %v", f.LeaseLife))
	}
	return problems
}

// List splits --redis into its addresses.
func (f *Redis) List() []string {
	var out []string
	for a := range strings.SplitSeq(f.Addrs, ",") {
		out = append(out, strings.TrimSpace(a))
	}
	return out
}
