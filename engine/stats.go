package engine

// Stats is a snapshot of an Engine's counters. The counters are read one
// after another while calls go on, so a snapshot taken under load may not
// add up to any single instant.
type Stats struct {
	// Allowed counts admitted calls, peeks included.
	Allowed uint64
	// Denied counts calls that took nothing, capacity denials included.
	Denied uint64
	// Evicted counts buckets removed because they were full: by the
	// sweeper, by SweepAt, or to make room under MaxKeys.
	Evicted uint64
	// Live is the number of buckets in the table, as Len.
	Live int
	// Overflow counts calls on keys without a bucket that found MaxKeys
	// buckets live and none evictable: decided by the overflow bucket
	// (FullShare), or denied (FullDeny). They are also counted in Allowed
	// or Denied.
	Overflow uint64
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{
		Allowed:  e.allowed.load(),
		Denied:   e.denied.load(),
		Evicted:  e.evicted.Load(),
		Live:     e.Len(),
		Overflow: e.overflow.Load(),
	}
}
