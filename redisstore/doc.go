// Package redisstore is a token-bucket rate limiter whose buckets live in
// Redis (or Valkey), so that every instance of a service enforces one limit
// together instead of one each.
//
// A Limiter implements engine.Limiter, with the Decision semantics of
// package engine: the same Config fields for the limit, the same Decision
// (Allowed, Remaining, RetryAfter, ResetAfter) and TakeAll for several
// buckets, all or none. Code written against engine.Limiter switches from an
// engine.Engine with a change of constructor:
//
//	l, err := redisstore.New(client, redisstore.Config{Limit: 10, Burst: 50})
//	...
//	d, err := l.Take(ctx, userID, 1)
//	if !d.Allowed {
//		// 429, Retry-After: d.RetryAfter
//	}
//
// There is no AllowAt: the server's clock is the only clock, and a time
// from the caller would let instances with skewed clocks disagree. Tokens
// observes a bucket without writing.
//
// New takes a github.com/redis/rueidis client, which pipelines concurrent
// calls onto shared connections; NewGoRedis adapts a github.com/redis/go-redis/v9
// client.
//
// # One script, one clock
//
// Every decision is one Lua script, run by EVALSHA (and by EVAL when the
// server has lost the script: a restart, a failover, SCRIPT FLUSH; NOSCRIPT
// means the script did not run, so nothing is taken twice). The script reads
// the server's TIME, refills and takes atomically, and writes only when it
// takes: a denial or a peek writes nothing. The server's clock is the only
// clock, so instances need no synchronised clocks; a bucket's stored time
// never moves back, so a server clock that steps back creates no tokens (it
// only delays refill until the clock catches up).
//
// A bucket's key expires when the bucket would be full again (the TTL is the
// time to a full refill rounded up: never earlier, at most one quantum's
// refill and 3 ms later), because a full bucket and a missing key are the
// same thing. Memory in Redis is therefore bounded by the keys active within
// one fill time.
//
// # Units
//
// Lua numbers are float64, exact for integers below 2^53, and Redis turns
// them into integer replies by truncation. The scripts therefore work only in
// integers below 2^53, never through tostring:
//
//   - tokens in quanta of 0.001 token, as the engine (capacity at most 1e12);
//   - time in microseconds since the Unix epoch, the resolution of TIME
//     (about 2^50.6 today);
//   - the rate as a fraction p/q quanta per microsecond, p and q below 2^52.
//
// A script returns the bucket's state (its tick and quanta) and the server's
// time; the Limiter derives RetryAfter and ResetAfter from them in 128-bit
// integer arithmetic, the same computation in Lua costing the server more
// than the rest of the take.
//
// A product that could reach 2^53 (elapsed time times p, a phase) is formed
// by doubling with quotient and remainder kept apart, so every quotient the
// scripts compute is at most a whole fill's refill (1e12 quanta) or a fill
// time (3.2e13 microseconds). Usual configurations never take that slow
// path: their p*q is below 2^53.
//
// Refill follows the engine's grid: G(t) = floor(t*p/q) quanta at microsecond
// t, counted from the Unix epoch, credited by differences of G, so no
// fraction of a quantum is dropped between updates; a bucket found full is
// stamped at the grid's next whole quantum; every rounding denies.
//
// When the configured float64 rate divided by 1000 is such a fraction
// (Limiter.Exact: integers, and most rates with a few binary places) the
// store is the engine's arithmetic exactly. Otherwise the rate is the closest
// fraction below it with q at most sqrt(2^53/r) (so that p*q stays below
// 2^53 and the scripts' products take the short path) if that is within
// 2^-53 of the rate, else the closest with p and q below 2^52: less than
// 1e-15 of the rate below it, so that refill instants, which the grid counts
// from 1970, come under a microsecond late; decimal rates such as 0.1 or
// 123.456 land on their decimal value. For Bursts up to 268,435 (the
// engine's 1 ns tick) and rates from a token every 194 days up to 1000
// tokens per second, the store and
// an engine given the same times, with an epoch where both grids are on a
// whole quantum, return identical Decisions; the tests check this on random
// operation streams, decimal rates included. For a decimal rate that float64
// holds only approximately (0.1 is a hair above one tenth), the engine's
// grid, which follows the float64, reaches each whole quantum a hair before
// the store's decimal one: a bucket found full at the very microsecond the
// decimal grid is on a whole quantum (one in 10,000 for 0.1) is stamped
// there by the store and a quantum's refill later by the engine. Both stay
// at or below an exact bucket; the tests leave such a key for a new one.
//
// The one place they part: a bucket's key expires when it is full, and Redis
// forgets it; if the server's clock then steps back before that instant, the
// bucket is full, as it was at the later reading, where the engine, which
// keeps the bucket's time, would still be refilling it.
//
// # Several buckets
//
// TakeAll takes from several buckets, possibly of several Limiters on one
// client, or from none. When all keys share a Redis Cluster hash slot it is
// one atomic script. Otherwise the takes run one after another and a denial
// gives the earlier ones back; see TakeAll for what that guarantees: no bucket ever
// admits more than it would have had the call never been made, but a
// concurrent caller may be denied for tokens about to be given back.
//
// # Batching
//
// A round trip and a script's fixed cost (starting the script, reading the
// server's clock, the reply) are most of a check's price. So a Limiter sends
// at most four scripts at a time: single-key checks (Take, Allow, Tokens,
// a TakeAll of one take) made while four are on their way wait for one to
// return, then go together, up to Config.MaxBatch (64) in one script. The
// script decides each as a call of its own, in arrival order, at one reading
// of the clock, so the decisions are those of consecutive calls; a lone
// caller waits for nothing. A check's deadline counts from its arrival, its
// wait in the queue included; one whose context ends while it waits is
// answered by the policy at once and is not sent. Stats.Scripts tells how
// many scripts carried the checks. Redis Cluster clients send each check
// alone, as one script's keys must share a hash slot.
//
// # Calendar quotas
//
// A Store binds a Spec with a Calendar to a Quota: N tokens per day, week,
// month or year of a calendar, with the Decisions of engine.Quota, decided
// together with token buckets in one script. The instance reads the
// calendar and the server's clock picks the period; see Quota for the
// exact rule, its keys and what a failure does.
//
// # Strict windows
//
// A Store binds a Spec with a Window to a Window: never more than N tokens
// in any span of the window, with the Decisions of engine.Window, decided
// together with token buckets and quotas in one script. The server's clock
// picks the slot; see Window for its keys, what a clock stepping back does
// and what a failure does.
//
// # Keys and Redis Cluster
//
// A bucket's key is Prefix, then a tag naming the limit (16 hex digits of a
// hash of Burst and the rate fraction), then ":{"+key+"}": the key is its own
// hash tag, so each bucket lives whole in one slot. The tag keeps limiters
// with different limits off each other's buckets even when they share a
// Prefix; limiters with the same limit and Prefix share them. A key that
// already contains a hash tag follows the limit's tag with "=" and keeps its
// braces, which lets callers put related buckets in one slot:
// "{tenant7}:user42" and "{tenant7}" share one, and a TakeAll over them is
// atomic. A key longer than engine.MaxKeyBytes (128 bytes) is stored as its
// SHA-256 (engine.BoundedKey), so a bucket costs Redis the same whatever its
// key; such a key's own hash tag then no longer counts. See KeyFor.
//
// # Leases
//
// NewLeased decides most checks in the instance (package lease on a
// Limiter, which implements lease.Store; see the manual's docs/leases.md):
// it takes tokens from a key's shared bucket in leases, sized from the
// key's local demand (at most LeaseOptions.MaxShare of the burst), and
// spends them with one CompareAndSwap and no I/O; when half a lease is left
// it fetches the next in the background, so a steady caller does not wait
// for Redis. A leased bucket refills only up to the burst less what
// unexpired leases hold, so bucket and leases together never hold more than
// the burst, and every instance together admits at most Burst + Limit ×
// span in any span, as one bucket would. A lease ends at its
// Lifetime (its unspent tokens then lost, never admitted twice), when the
// instance asks for the next one, or early when the key falls idle (its
// unspent tokens back in the bucket). A key whose bucket cannot grant is
// denied locally until it can. Leased buckets are apart from the per-check
// ones of the same limit.
//
// # In-flight slots
//
// A Store keeps in-flight slots too (Store.BindSlots, engine.Slots): at
// most N requests of a key in flight at once across the instances. A
// key's slots are a sorted set of their holders, each scored by when its
// slot expires (Redis TIME in milliseconds), StoreOptions.SlotTTL (30 s
// by default) after its acquire or last renewal; an acquire is one script
// that removes the expired, counts and adds, so no more than N are ever
// held. Renew renews many slots in one script per 500 (per hash slot on a
// cluster), sent at once.
//
// # Failure
//
// Every call to Redis has a deadline (Config.Timeout, 100 ms by default, on
// top of the context's). When the store fails, OnFailure (a FailurePolicy)
// decides: FailOpen (the zero value) allows and changes nothing, FailClosed
// denies, Fallback asks a local engine.Engine holding FallbackShare of the
// limit. A Store's Limiters always fall back, at 1/N of the limit unless
// StoreOptions.FallbackShare fixes the share, N the instances that recorded
// a heartbeat in Redis within five heartbeats. The call returns that Decision with the error, and Stats counts it.
// After BreakAfter consecutive failures a breaker answers by the policy
// without calling Redis for BreakFor, so an outage does not make every
// request wait for its deadline.
//
// The error tells a caller with a policy of its own what happened, as
// engine.Limiter documents: it wraps engine.ErrUnavailable when nothing was
// taken for certain (the breaker answered ErrBreakerOpen; the context had
// ended before the call was sent; the call was a peek, which takes nothing;
// or the connection was refused, or Redis refused the script with LOADING,
// BUSY or MASTERDOWN, which for go-redis clients counts only without
// retries: see NewGoRedis), and engine.ErrOutcomeUnknown otherwise: a call
// that timed out or lost its connection after it was sent may have run. With
// Fallback, the errors of calls the local engines decided also wrap
// engine.ErrFallback: their Decisions stand.
//
// A call that times out may still have run on the server: its tokens are
// then spent although the policy answered. That under-admits (the store
// counts a request that FailClosed denied); it never over-admits beyond what
// the policy itself allows.
//
// Bad configuration is an error naming the field and its range; nothing
// panics.
package redisstore
