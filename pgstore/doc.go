// Package pgstore is a token-bucket rate limiter whose buckets live in
// PostgreSQL, so that every instance of a service that shares a database
// enforces one limit together instead of one each: for teams that run
// PostgreSQL and no Redis.
//
// A Limiter implements engine.Limiter with the Decision semantics of package
// engine: the same Config fields for the limit, the same Decision (Allowed,
// Remaining, RetryAfter, ResetAfter) and TakeAll for several buckets, all or
// none. Code written against engine.Limiter switches with a change of
// constructor:
//
//	pool, err := pgxpool.New(ctx, dsn)
//	...
//	err = pgstore.Install(ctx, pool, pgstore.Schema{}) // once, or at every start
//	l, err := pgstore.New(pool, pgstore.Config{Limit: 10, Burst: 50})
//	d, err := l.Take(ctx, userID, 1)
//	if !d.Allowed {
//		// 429, Retry-After: d.RetryAfter
//	}
//
// # One statement, one clock
//
// Every decision is one statement, a function Install creates, so one round
// trip: where the common pattern (BEGIN; INSERT ... ON CONFLICT DO NOTHING;
// SELECT ... FOR UPDATE; compute in the application; UPDATE; COMMIT) takes
// five, and holds the row lock across them. The function reads the
// database's clock, the only clock, so instances need no synchronised
// clocks; a bucket's time never moves back, so a clock that steps back
// creates no tokens (nor does one that steps back by less than a minute
// after a sweep removed the row of a full bucket: see Sweep).
//
// The function reads the bucket without locking: a denial or a peek writes
// nothing and locks nothing (writing on a denial would also restart the
// refill), so a flood of denied requests costs the database reads only. A
// take writes with a compare-and-swap, an UPDATE that applies only if the
// row still holds the state it read, retried inside the function when a
// concurrent take got there first; the UPDATE's row lock orders them. A
// missing row is a full bucket: the first take inserts it.
//
// # Coalescing
//
// The takes of one key serialise on its row lock, however many callers
// send them: with a statement per caller, a hot key's statements queue
// inside the database, each holding a connection, each writing a row
// version, and the more callers the slower each check. So a Limiter keeps
// at most one statement per key in flight. Single takes (Take, Allow,
// Tokens, and TakeAll with one take) of a key that arrive while its
// statement is in flight wait, and go together in the next statement, up
// to 1,000 of them, in the order they arrived; the first of them sends it
// and hands the one after to the first of the takes that arrived
// meanwhile, so no caller works for others beyond one statement. A take
// that finds its key idle goes at once: a lone caller waits for nothing,
// and different keys never wait for each other.
//
// Each take keeps its own Decision: the function decides a batch's takes
// one after another, each as if it came alone, at the statement's one
// reading of the clock, from one read of the row, and writes the row once
// (retrying the whole batch if a concurrent statement changed the row
// first). A caller whose context ends while its take still waits leaves at
// once with the failure policy's answer and an error wrapping
// engine.ErrUnavailable: nothing was sent. Once sent, its take is decided
// and it waits for the statement, which no caller's context cancels (a
// lone take's excepted): the Limiter's Timeout bounds it. If the statement
// fails, every take of the batch gets the failure policy's answer and the
// classified error, and the breaker counts one failure. Multi-take TakeAlls
// do not coalesce: each is a statement of its own, atomic.
// Config.DisableCoalescing turns coalescing off, for comparison only.
//
// The arithmetic is the engine's, in exact integers (numeric): tokens in
// quanta of 0.001, time in microseconds since the Unix epoch, the rate as a
// fraction of quanta per microsecond taken from the engine's own
// representation (fixedpoint.Layout.Rate), on the engine's refill grid,
// every rounding toward denying. For Bursts up to 268,435 tokens (the
// engine's 1 ns tick), a Limiter and an engine given the same times return
// identical Decisions; the tests check this on random operation streams.
//
// # Rows and their expiry
//
// A row is a bucket that is not full: its key (bytes: any key, with
// engine.BoundedKey's bound of 128 bytes), the microsecond its state was
// taken at, the quanta it held and the microsecond it is full again. Past
// that a row means nothing: Sweep deletes such rows, a minute later,
// walking the primary key in batches (no statement touches more than
// SweepOptions.Batch rows, so a flood of one-off keys never leads to an
// unbounded DELETE) and skipping rows a take holds; a Store sweeps in the
// background. Only unindexed columns change on a take, so
// takes are heap-only updates. The table is UNLOGGED unless
// Schema.Logged: see Schema for the trade-off.
//
// # Several buckets
//
// TakeAll over Limiters on the same DB is one statement and atomic: it
// evaluates without locking and returns a denial there; otherwise it locks
// the rows in key order (so concurrent TakeAlls do not deadlock each
// other), evaluates again and writes. The functions need READ COMMITTED
// isolation, PostgreSQL's default, and refuse a session with another.
//
// # Calendar quotas
//
// A Store binds a Spec with a Calendar to a Quota: N tokens per day, week,
// month or year of a calendar, with the Decisions of engine.Quota, its
// rows in the bucket table, decided with token buckets in one statement.
// The instance reads the calendar and the database's clock picks the
// period; see Quota for the exact rule and what a failure does.
//
// # Strict windows
//
// A Store binds a Spec with a Window to a Window: never more than N tokens
// in any span of the window, with the Decisions of engine.Window, its rows
// in the bucket table (their counts in the column counts), decided with
// token buckets and quotas in one statement. The database's clock picks
// the slot; see Window for what a clock stepping back and a failure do.
//
// # Leases
//
// NewLeased (or StoreOptions.Lease) decides most checks in the instance
// (package lease; the manual's docs/leases.md): it takes tokens from a
// key's shared bucket in leases and spends them locally, calling the
// database once per lease rather than once per check, while every instance
// together admits at most Burst + Limit × span in any span. A Limiter
// implements lease.Store with two functions Install creates, Table_lease
// and Table_release, on two tables of their own (Table_lease_buckets,
// Table_leases): leased buckets are apart from the per-check ones.
// CheckLeases names a schema installed before leases (Check, which
// per-check Limiters need, accepts it); Install again adds them.
//
// # In-flight slots
//
// A Store keeps in-flight slots too (BindSlots, engine.Slots): at most N
// requests of a key in flight at once across the instances. A slot is a
// row of a table of its own, Table_slots (key, holder, the microsecond it
// expires at, StoreOptions.SlotTTL after its acquire or last renewal, 30
// s by default), which three functions Install creates keep:
// Table_slots_acquire, under an advisory lock of the key's hash so that
// acquires of a key take turns and each counts what the one before took,
// Table_slots_release and Table_slots_renew (many slots, one statement).
// Sweep also removes slots expired for a minute. CheckSlots names a
// schema installed before slots; Install again adds them.
//
// # Failure
//
// Every statement has a deadline (Config.Timeout, 100 ms by default, on
// top of the context's, but for a batch of coalesced takes). A take that must wait for a row lock held by
// someone else (a stuck transaction) gives up inside the database at nine
// tenths of it, so that its error is certain that nothing was taken. When
// the store fails, Config.OnFailure decides: FailOpen (the zero value)
// allows, FailClosed denies, Fallback asks a local engine holding
// FallbackShare of the limit (a Store's Limiters always fall back, at 1/N
// of the limit unless StoreOptions.FallbackShare fixes the share, N the
// instances whose heartbeat rows are alive in the table); a breaker stops calling the database for BreakFor after
// BreakAfter consecutive failures. The error wraps engine.ErrUnavailable
// when nothing was taken for certain (not sent, no connection to be had,
// or an ERROR from the database, which rolls the statement back), else
// engine.ErrOutcomeUnknown (the connection was lost, the deadline passed
// after sending, or the backend was terminated: the statement may have
// committed), and engine.ErrFallback when the local engine decided. Callers
// that give up and rows held by stuck transactions do not count toward the
// breaker: neither says the database is down.
//
// Bad configuration is an error naming the field and its range; nothing
// panics.
package pgstore
