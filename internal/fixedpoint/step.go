package fixedpoint

// Step is the outcome of taking cost quanta from a bucket at a tick.
//
// It has four fields so that the compiler keeps it in registers: with a
// fifth, every take would build it in memory and copy it twice. Write and
// NeedsEpoch are therefore computed from the fields rather than stored.
type Step struct {
	// Next is the word to publish, or Tomb when nothing is to be written (a
	// denial, a peek) or when the new state does not fit the bucket's epoch
	// (see NeedsEpoch). Tomb is never the word of a live bucket, so it
	// cannot be meant.
	Next Word
	// At is the tick the decision was taken at: max(last update, now), or
	// the next quantum boundary when the bucket was full (see Boundary).
	At int64
	// Tokens is the count after the step: after the take when Allowed and
	// cost > 0, otherwise the refilled count at At.
	Tokens uint64
	// Allowed reports whether cost was available (always, for cost 0).
	Allowed bool
}

// Write reports that Next must be stored.
func (s Step) Write() bool { return s.Next != Tomb }

// NeedsEpoch reports a take that was allowed but whose state, stamped At,
// lies past the span of its bucket's epoch: the bucket must be replaced by
// one of epoch EpochOf(At) holding Tokens at At.
func (s Step) NeedsEpoch(cost uint64) bool { return s.Allowed && cost > 0 && s.Next == Tomb }

// Take computes taking cost quanta (cost <= Capacity) from w, a word of a
// bucket whose epoch starts at base, at now. A denied take and a peek (cost
// 0) change nothing and write nothing.
func (l *Layout) Take(w Word, base int64, now Instant, cost uint64) Step {
	_, at, tokens := l.Advance(w, base, now)
	if cost > 0 && tokens >= cost {
		next, _ := l.Pack(base, at, tokens-cost) // Tomb if it does not fit
		return Step{Next: next, At: at, Tokens: tokens - cost, Allowed: true}
	}
	return Step{Next: Tomb, At: at, Tokens: tokens, Allowed: cost == 0}
}
