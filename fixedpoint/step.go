package fixedpoint

// Step is the outcome of taking cost quanta from a bucket at a tick.
type Step struct {
	// Next is the word to publish when Write is set.
	Next Word
	// At is the tick the decision was taken at: max(last update, now), or
	// the next quantum boundary when the bucket was full (see Boundary).
	At int64
	// Tokens is the count after the step: after the take when Allowed and
	// cost > 0, otherwise the refilled count at At.
	Tokens uint64
	// Allowed reports whether cost was available (always, for cost 0).
	Allowed bool
	// Write reports that Next must be stored: after a take, or to renew a
	// word older than Stale (same state, fresher tick).
	Write bool
}

// Take computes taking cost quanta (cost <= Capacity) from w at now,
// with ref the engine's reference tick. A denied take and a peek (cost 0)
// leave the state as it was; they write only to renew a word older than
// Stale, which the fixed refill grid makes invisible to later decisions.
func (l *Layout) Take(w Word, ref int64, now Instant, cost uint64) Step {
	last, at, tokens := l.Advance(w, ref, now)
	s := Step{At: at, Tokens: tokens}
	if cost > 0 && tokens >= cost {
		s.Allowed, s.Write = true, true
		s.Tokens = tokens - cost
		s.Next = l.Pack(at, s.Tokens)
		return s
	}
	s.Allowed = cost == 0
	if at > last && last < ref-l.Stale {
		s.Write = true
		s.Next = l.Pack(at, tokens)
	}
	return s
}
