// Package limitertest is the conformance suite of engine.Limiter: one set of
// tests that every implementation runs, the in-memory engine.Engine and every
// shared store alike. A new store is done when it passes it.
//
// A store's test calls Run once with a Harness:
//
//	func TestConformance(t *testing.T) {
//		limitertest.Run(t, limitertest.Harness{
//			Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter { ... },
//		})
//	}
//
// The suite checks the semantics engine.Limiter documents: buckets start
// full; a peek (n == 0) and a denial take nothing; invalid costs are denied
// with RetryAfter InfDuration; Remaining, RetryAfter and ResetAfter tell the
// truth; TakeAll takes from every bucket or from none and reports misuse as
// errors; keys are independent; and concurrent takes on one key admit
// exactly the burst.
//
// A limiter that implements engine.TakerAt runs on a virtual clock that the
// suite drives, and every figure is checked exactly. Any other limiter keeps
// its own time (a Redis server's): the suite then sleeps in real time, with
// short waits, and allows for the refill of the time that passes between
// calls, never for admitting early. Optional interfaces (engine.Retuner) are
// checked when implemented; a subtest that cannot apply says why it skips.
//
// # Calendar quotas
//
// A store that keeps calendar quotas also calls RunQuota with a
// QuotaHarness, which returns an engine.Store: the suite binds quotas
// through it (engine.QuotaSpec) and token buckets beside them, as a server
// does. It checks the semantics engine.Quota documents: a new key has the
// whole quota; takes count it down exactly; a denial takes nothing and
// waits, as the reset does, until the end of the period that
// engine.Calendar.Bounds gives; a peek takes nothing; invalid costs and
// costs above the quota are denied with RetryAfter InfDuration; keys are
// independent; Take agrees with TakeAll; a TakeAll with a token bucket
// takes from both or neither, whichever denies; a take's own calendar
// (engine.Take.Calendar) sets where a new key's period ends, and no change
// of calendar gives back what a key took; SetQuota (engine.QuotaRetuner)
// gives room at once and keeps what was taken; and concurrent takes on one
// key admit exactly the quota.
//
// A quota that implements engine.TakerAt runs on a virtual clock, and every
// wait is checked exactly. Any other runs at its store's clock, which
// QuotaHarness.Now reads: the suite uses monthly calendars whose periods
// end days away, and checks each wait against the period's end within the
// span of the call and 2 s.
//
// # Strict windows
//
// A store that keeps strict windows calls RunWindow with a WindowHarness,
// which returns an engine.Store as QuotaHarness does: the suite binds
// windows (engine.WindowSpec) through it. It checks the semantics
// engine.Window documents: a new key has the whole limit; takes count it
// down exactly; a denial and a peek take nothing; invalid costs are denied
// with RetryAfter InfDuration; keys are independent; Take agrees with
// TakeAll; a TakeAll with a token bucket takes from both or neither;
// RetryAfter and ResetAfter are never early, and never past a window and a
// slot; no span of the window, on the store's clock, holds more than the
// limit, for a steady client and for takes a little less than a window
// apart, and a steady client gets at least Slots/(Slots+1) of the limit
// per window (on the virtual clock); SetLimitTokens, when implemented,
// gives room at once and keeps what was taken; and concurrent takes on one
// key admit exactly the limit. Windows of an hour count, and windows of a
// second are waited for: on a store with its own clock the suite sleeps
// about 10 s in all.
//
// # In-flight slots
//
// A store that keeps in-flight slots (engine.SlotStore) calls RunSlots
// with a SlotHarness, whose Open returns one more instance's store on the
// same slots each time, with a TTL of 1 to 3 s: the suite checks the
// semantics engine.Slots documents, with two stores standing for two
// instances where it matters, and waits for expiry in real time with wide
// margins (a slot is still held at TTL/2, free after 2×TTL and a second).
package limitertest
