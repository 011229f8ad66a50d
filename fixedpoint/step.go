package fixedpoint

// Step is the outcome of taking cost quanta from a bucket at a tick.
//
// It has four fields so that the compiler keeps it in registers: a fifth
// (a Write flag) made every take build it in memory and copy it twice.
type Step struct {
	// Next is the word to publish, or Tomb when nothing is to be written
	// (Tomb is never the word of a live bucket, so it cannot be meant).
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

// Write reports that Next must be stored: after a take, or to renew a word
// older than Stale (same state, fresher tick).
func (s Step) Write() bool { return s.Next != Tomb }

// Take computes taking cost quanta (cost <= Capacity) from w at now,
// with ref the engine's reference tick. A denied take and a peek (cost 0)
// leave the state as it was; they write only to renew a word older than
// Stale, which the fixed refill grid makes invisible to later decisions.
func (l *Layout) Take(w Word, ref int64, now Instant, cost uint64) Step {
	last, at, tokens := l.Advance(w, ref, now)
	if cost > 0 && tokens >= cost {
		return Step{Next: l.Pack(at, tokens-cost), At: at, Tokens: tokens - cost, Allowed: true}
	}
	s := Step{Next: Tomb, At: at, Tokens: tokens, Allowed: cost == 0}
	if at > last && last < ref-l.Stale {
		s.Next = l.Pack(at, tokens)
	}
	return s
}
