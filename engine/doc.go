// Package engine is an in-memory, lock-free, keyed token-bucket rate limiter.
//
// An Engine keeps one bucket per key. A bucket holds at most Burst tokens,
// starts full, and refills continuously at Limit tokens per second; the refill
// is computed when a key is used, with no timers. A request takes n tokens if
// the bucket holds them (weighted costs, fractional to 0.001) and is denied
// otherwise, with the exact wait until it would succeed:
//
//	e, err := engine.New(engine.Config{Limit: 10, Burst: 50})
//	...
//	if d := e.AllowN(userID, 1); !d.Allowed {
//		// 429, Retry-After: d.RetryAfter
//	}
//
// Allow and AllowN read the monotonic clock; AllowAt, TokensAt and SweepAt
// take the time as an argument, for tests, simulations and callers that have
// already read the clock.
//
// SetLimit, SetBurst and SetAt change the limit at runtime. Every bucket
// keeps its tokens at the change (capped at a smaller burst) and refills at
// the new rate from then; keys without a bucket change alike, as buckets
// full from the start, so a raise of the burst reaches every key at the new
// rate, not at once.
//
// Wait and WaitN block until the tokens are taken or a context ends, as in
// golang.org/x/time/rate; ReserveN takes tokens at the first instant that
// has them, possibly in the future, and every later call is decided from
// that instant, so waiters are served in arrival order and no take jumps
// the queue. A cancelled reservation gives back what no later one relies
// on, never sooner than the refill would have.
//
// # Concurrency
//
// All methods are safe for simultaneous use. On a key that has a bucket,
// Allow, AllowN, AllowAt and TokensAt take no lock and allocate nothing: a
// hash, an atomic index lookup, and a CompareAndSwap loop on the bucket's one
// 64-bit word. The first use of a key takes its shard's mutex to insert the
// bucket, and so does, at most once per half a Precision().Horizon of a
// bucket's own progress, a take whose time lies past the span of its
// bucket's packed timestamp: the bucket is then replaced by one that holds
// it (one allocation of 32 bytes for a 13-byte key; about 160 ns against 50
// for a take, BenchmarkAllowAt/epoch=every). Decisions are linearizable per
// key: each one takes effect at one instant between the call and its return.
//
// # Time
//
// The engine counts time from its epoch, the first time it is given or reads.
// Only differences matter, so any consistent clock works, including a virtual
// one starting at time.Time{}. A time earlier than a bucket's last update
// counts as that update: it neither adds tokens nor moves the bucket back, so
// goroutines that read the clock and then lose a race cannot mint tokens (this
// is stricter than golang.org/x/time/rate, which rebases the bucket to the
// earlier time). Each bucket's state is exact on its own, whatever other keys
// do: a clock that jumps by years, a process stopped for a month or an engine
// that is never swept reads every bucket as the exact bucket would.
//
// # Accuracy
//
// Tokens are counted in thousandths and time in ticks of 1 ns or more
// (Precision). Every rounding denies rather than admits: the engine never
// admits a request that an exact, real-number token bucket would deny, and
// trails that bucket by a bounded amount however many requests are made.
// Package fixedpoint states the bound for every layout.
//
// # Memory
//
// A live key costs one 32-byte index slot holding its word and, up to 16
// bytes, its key (package shard has the accounting: 43 to 55 bytes, about
// 48 on average); a key longer than
// MaxKeyBytes is stored as a 33-byte digest (BoundedKey), so
// no key costs more than about 160 bytes, whoever chose it. A background
// sweeper (SweepInterval) evicts buckets that are full, which is lossless
// because a full bucket is exactly what an unknown key starts with.
// MaxKeys bounds the number of live buckets at every instant.
//
// # Several buckets
//
// TakeAll and TakeAllAt take tokens from several (Engine, key) pairs or from
// none: per-user, per-tenant and global limits that must all pass. A denial
// gives back what the call took and reports which take was denied; see
// TakeAllAt for the exact guarantee under concurrency. All and AllEngines
// make several limits on one key one Limiter, a Multi ("10 a second and
// 10,000 a day per API key"), decided in one TakeAll.
//
// # One contract for every store
//
// Limiter is the interface that the Engine and every shared store (package
// redisstore, for one) implement: Take and TakeAll with a context and an
// error, which a store that does I/O needs and the Engine answers without
// allocating. Store binds the Limiters of many limits, sharing those of one
// ID; NewPool makes a Store from a function that opens a Limiter. Package
// limitertest is the conformance suite every implementation passes.
//
// # Other shapes of limit
//
// Quota is a calendar quota (N tokens per day, week, month or year of a
// zone's calendar, renewed at once) and Window a strict window (never more
// than N in any span); both are Limiters that TakeAll decides with Engines,
// and Spec.Calendar and Spec.Window bind them through a Store.
//
// A store that keeps quotas outside this process decides them by its own
// clock, as its token buckets, and the instance reads the calendar (a
// store may have no zone rules, or others than Go's). Each take carries
// b1, the end of the period that holds the instance's clock by the take's
// calendar, and b2, the end of the period after it, rounded up to a whole
// minute (a store's own unit: the engine's word counts quarter hours). The
// store reads its clock T: a key that took something in a period that ends
// after T is still in that period (a clock that steps back stays in it);
// otherwise a new period begins, ending at b1 if T is before b1, else at
// b2 if T is before b2; otherwise the two clocks differ by more than a
// period, and the take fails with an error wrapping ErrUnavailable, taking
// nothing. So clocks a few seconds apart agree on where periods end: an
// instance s seconds behind the store still renews each key at the store's
// b1, and one s seconds ahead begins a key's next period at most s seconds
// early. A denial writes nothing; RetryAfter is the time to the period's
// end. A key's record expires at its period's end, since an ended period
// and a missing record are the same: a store clock that steps back after
// that finds no period and begins one.
//
// A SlotStore also keeps in-flight slots (Slots): at most N requests of a
// key in flight at once, across every process sharing the store. A slot
// is held by a holder id until released, or until TTL (DefaultSlotTTL, 30
// s, unless the store sets another) passes without a renewal: a holder
// that dies frees its slots that late, and one that holds a slot longer
// renews it about every TTL/3. The counts are exact while every holder is
// alive and renews in time, and decided at the store's clock.
//
// # Failure
//
// A new key that finds MaxKeys buckets live and none full takes its tokens
// from one overflow bucket that every such key shares, with the engine's
// Limit and Burst (OnFull FullShare), or is denied (FullDeny); either way it
// is counted in Stats.Overflow, and a full table never lets a key past the
// limit. Bad configuration is an error from New naming the field and its
// range; bad costs are denials with RetryAfter InfDuration. Misuse that
// TakeAll can detect (a nil or foreign Limiter in a Take, a short out) is an
// error, and so is calling Take or TakeAll on a nil *Engine. Nothing panics,
// except methods without an error result called on a nil *Engine.
package engine
