package engine

import (
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// SetLimit changes the refill rate now; see SetAt.
func (e *Engine) SetLimit(limit Limit) error {
	return e.SetAt(time.Now(), limit, e.Burst())
}

// SetLimitAt changes the refill rate at time t; see SetAt.
func (e *Engine) SetLimitAt(t time.Time, limit Limit) error {
	return e.SetAt(t, limit, e.Burst())
}

// SetBurst changes the bucket capacity now; see SetAt.
func (e *Engine) SetBurst(burst float64) error {
	return e.SetAt(time.Now(), e.Limit(), burst)
}

// SetBurstAt changes the bucket capacity at time t; see SetAt.
func (e *Engine) SetBurstAt(t time.Time, burst float64) error {
	return e.SetAt(t, e.Limit(), burst)
}

// SetAt changes the engine's Limit and Burst at time t, keeping every
// bucket's state: each bucket holds at t the tokens it refilled to at the old
// rate (capped at the new burst, if smaller), and refills at the new rate
// from then on. Nothing is reset to full and nothing is lost. A bucket whose
// last update is later than t changes at that update instead; a call with a
// time before the change counts as at the change, as for any update.
//
// Keys without a bucket change alike: the engine behaves as if every key had
// a bucket, full, from the start, which is what makes dropping full buckets
// (sweeps) lossless. So a raise of the burst gives no key the new burst at
// once, neither a key never seen nor one idle for a long time: each holds
// the old burst at t and refills to the new one at the new rate. A client
// cannot get more by switching to a new key.
//
// The new values must lie in the domain New accepts; otherwise SetAt returns
// an error wrapping ErrInvalidConfig that names the field, and nothing
// changes.
//
// It is safe with concurrent calls: each key's history stays linearizable,
// the change taking effect for each key at one instant within SetAt. SetAt
// rewrites every bucket (in the new layout, if Burst changed the packed
// word's widths) before it returns, one shard at a time under the shard's
// mutex, as a sweep does; takes never wait for it.
//
// Rounding is against the caller, as everywhere: a change may cost a bucket
// up to 0.001 token and two ticks' refill at the new rate (see Precision),
// and a bucket found full in the last 0.001 token's refill time at the old
// rate (stored full from the old rate's next 0.001 token on) up to that
// time's refill at the new rate: 0.001 token times the ratio of the rates.
//
// A sweep at a time later than t that evicts a key before the change takes
// effect lets that key refill from t rather than from the sweep's time. On
// the engine's own clock (SetLimit, SetBurst and the background sweeper)
// that is the refill of the moment the two overlap; with virtual clocks,
// do not sweep at times later than a change that follows.
func (e *Engine) SetAt(t time.Time, limit Limit, burst float64) error {
	cfg := Config{Limit: limit, Burst: burst}
	l, err := cfg.layout()
	if err != nil {
		return err
	}
	e.setMu.Lock()
	defer e.setMu.Unlock()
	old := e.current()
	// A change at a time before the last one counts as at the last one, as
	// for any update: every bucket was updated then.
	since := max(e.nanosAt(t), old.since)
	g := &generation{layout: l, limit: limit, burst: burst, since: since, id: old.id + 1}
	g.setBlank(old)
	g.prev.Store(old)
	e.gen.Store(g)
	// move gives a bucket's state in g: as it is if of g, else lifted from
	// old (which g.prev reaches: the change before rewrote every bucket of
	// earlier generations before it returned).
	move := func(b *shard.Bucket, orig fixedpoint.Word) (uint16, fixedpoint.Epoch, fixedpoint.Word) {
		w, ep, _ := g.read(b, orig)
		return g.id, ep, w
	}
	for i := range e.table.Shards() {
		e.table.Rewrite(i, move)
	}
	e.spill.mu.Lock()
	if b := e.spill.b.Load(); b != nil && b.Gen() != g.id {
		var gen uint16
		var ep fixedpoint.Epoch
		var w fixedpoint.Word
		if b.TombIf(func(orig fixedpoint.Word) bool {
			gen, ep, w = move(b, orig)
			return true
		}) {
			e.spill.b.Store(shard.NewBucket(gen, ep, w))
		}
	}
	e.spill.mu.Unlock()
	// Every bucket is of g now: Insert and Replace read the generation
	// under the shard's mutex, and the overflow bucket is made under
	// spill.mu. None is of the generation before old.
	old.prev.Store(nil)
	return nil
}
