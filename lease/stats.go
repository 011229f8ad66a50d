package lease

import "sync/atomic"

// Stats is a snapshot of a Leased limiter's counters. Checks decided in the
// instance are not counted, to keep their path free of shared writes: with
// the caller's count of checks, 1 - Waited/checks is the share decided
// locally, and (Grants+Releases)/checks the store's calls per check.
type Stats struct {
	// Waited counts checks that waited for a grant from the store.
	Waited uint64
	// Grants and Releases count the calls to the store: grants (fetched
	// ahead or waited for) and early releases.
	Grants, Releases uint64
	// Expired counts leases that reached their local deadline with quanta
	// left: those quanta are lost to every instance until the store's
	// expiry.
	Expired uint64
}

type counters struct {
	waited, grants, releases, expired atomic.Uint64
}

// Stats returns the limiter's counters.
func (s *Leased) Stats() Stats {
	c := &s.stats
	return Stats{Waited: c.waited.Load(), Grants: c.grants.Load(), Releases: c.releases.Load(), Expired: c.expired.Load()}
}
