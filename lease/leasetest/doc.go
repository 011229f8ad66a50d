// Package leasetest is the conformance suite of the lease contract: one set
// of tests that every store implementing lease.Store runs against a real
// server, so that leased limiters keep their guarantees on each.
//
// A store's test calls Run once with a Harness:
//
//	func TestLeaseConformance(t *testing.T) {
//		leasetest.Run(t, leasetest.Harness{
//			Open: func(t *testing.T, group string, limit engine.Limit, burst float64) lease.Store { ... },
//		})
//	}
//
// The suite checks the contract's operations on the store (grants, the
// previous lease ended with its unspent quanta, releases, reports, waits),
// and the guarantees of lease.Leased limiters sharing one store: several
// instances never admit more than Burst + Limit × span together (counted
// exactly, over a span measured around every check); a newcomer gets a
// share of a key the others keep busy; the tokens held in leases stay
// within the documented bound and go back once demand stops; and a dead
// holder's lease stops counting at its expiry.
//
// The stores keep their own time, so the suite runs in real time with
// short lifetimes. Upper bounds are exact; lower bounds (the share a
// newcomer gets, the admissions that show leases do not strand tokens)
// have wide margins, so that a loaded machine does not fail a correct
// store. Run it under -race.
package leasetest
