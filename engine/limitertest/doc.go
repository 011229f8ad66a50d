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
package limitertest
