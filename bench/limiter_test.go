package bench

import (
	"math"
	"time"
)

// limiter is what every adapter provides: may key spend one token now? It
// must not block, must be safe for concurrent use, and must keep a separate
// bucket per key (unkeyed libraries say so in impl.keyed and ignore key).
type limiter interface {
	allow(key string) bool
}

// limit describes the bucket each key gets: rate tokens per second, burst
// tokens of capacity (a new key starts full).
type limit struct {
	rate  float64
	burst int
	// sweep, if non-zero, asks for this interval of background cleanup in
	// libraries that have one (faucet's sweeper); 0 keeps each default.
	sweep time.Duration
}

// impl is one implementation under test.
type impl struct {
	// name is the benchmark label: lower case, no spaces, no '-' or '/'.
	name string
	// keyed is false for libraries that have no notion of keys (one shared
	// limiter; key is ignored).
	keyed bool
	// blocking is true for libraries whose only call waits for a token
	// instead of refusing; they run only where the limit never binds.
	blocking bool
	// tokenBucket is false for libraries that are not token buckets
	// (fixed windows, GCRA); docs/performance.md says which.
	tokenBucket bool
	// new returns a limiter for lim; the harness calls close on it when done
	// (nil if nothing needs closing).
	new func(lim limit) (l limiter, close func())
}

// impls lists every implementation, in the order tables show them. Peer
// adapters register themselves in their own files' init functions.
var impls []impl

func register(i impl) { impls = append(impls, i) }

// spanOf converts seconds to a Duration of at least 1 ns, clamped to limit
// (also for +Inf and NaN, as from a zero rate): libraries that add durations to
// Unix nanoseconds overflow beyond about a century.
func spanOf(seconds float64, limit time.Duration) time.Duration {
	ns := math.Round(seconds * 1e9)
	switch {
	case !(ns < float64(limit)):
		return limit
	case ns < 1:
		return 1
	}
	return time.Duration(ns)
}
