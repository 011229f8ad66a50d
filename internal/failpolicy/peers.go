package failpolicy

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// Peers is the number of instances that share a store, as the store's
// heartbeats last counted them, and so the share of a shared limit that
// each instance's fallback keeps while the store is away: 1/N. It is safe
// for concurrent use. The zero value, and a Peers whose store never
// answered a heartbeat, counts 1: the instance knows of no other, so it
// keeps the whole limit.
type Peers struct {
	// n is the last count, 0 until the first. Written by the heartbeat
	// loop, read by any failing call: one atomic word, no lock.
	n atomic.Int64
	// beats counts the heartbeats the store answered.
	beats atomic.Uint64
}

// Set records a count of n instances (at least 1: the one counting).
func (p *Peers) Set(n int) {
	p.n.Store(int64(max(n, 1)))
	p.beats.Add(1)
}

// N returns the last count, or 1 before the first.
func (p *Peers) N() int {
	if p == nil {
		return 1
	}
	return int(max(p.n.Load(), 1))
}

// Known reports whether the store has answered a heartbeat.
func (p *Peers) Known() bool { return p != nil && p.beats.Load() > 0 }

// Share returns 1/N.
func (p *Peers) Share() float64 { return 1 / float64(p.N()) }

// Beat is one heartbeat of a store: record this instance as alive, stamped
// with the store's clock, and return how many instances were alive within
// the window (this one included).
type Beat func(ctx context.Context) (int, error)

// DefaultHeartbeat is how often an instance records itself in a shared
// store unless its options say otherwise.
const DefaultHeartbeat = time.Second

// HeartbeatEvery is the interval of a store's Heartbeat option: 0 picks
// DefaultHeartbeat, negative none (0).
func HeartbeatEvery(d time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return DefaultHeartbeat
	}
	return d
}

// Heartbeat runs beat at once and then every `every` until stop is closed,
// each call bounded by timeout, recording each count in p. A failed beat
// keeps the last count: while the store is away, the instances that were
// alive are the best guess of those still sharing it. onErr, if not nil,
// receives every failure.
func Heartbeat(stop <-chan struct{}, every, timeout time.Duration, beat Beat, p *Peers, onErr func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	for {
		bctx, bcancel := context.WithTimeout(ctx, timeout)
		n, err := beat(bctx)
		bcancel()
		switch {
		case err == nil:
			p.Set(n)
		case ctx.Err() == nil && onErr != nil:
			onErr(err)
		}
		t := time.NewTimer(every)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// SharedFallback returns the Config of the fallback engine of a Limiter
// with limit and burst whose share follows Peers (Take.Peers): the whole
// limit, until Retune sets the share, at most maxKeys buckets (as Check).
func SharedFallback(limit engine.Limit, burst float64, maxKeys int) engine.Config {
	return engine.Config{Limit: limit, Burst: burst, MaxKeys: engineMaxKeys(maxKeys)}
}

// shareOf is the fallback limit at share of limit and burst: the burst
// rounded down to a whole quantum but at least one token (the engine's
// least; every burst is at least that), so that every instance can still
// admit a request of cost 1 however many share the limit.
func shareOf(limit engine.Limit, burst, share float64) (engine.Limit, float64) {
	b := math.Floor(burst*share*fixedpoint.QuantaPerToken) / fixedpoint.QuantaPerToken
	return limit * engine.Limit(share), max(b, 1)
}

// Retune gives e share of limit and burst (shareOf), if it does not hold
// them already.
func Retune(e *engine.Engine, limit engine.Limit, burst, share float64) {
	l, b := shareOf(limit, burst, share)
	if e.Limit() == l && e.Burst() == b {
		return
	}
	// A limit the full one passed CheckLimit with can fail only at a tiny
	// share: the rate below the engine's least. The engine then keeps its
	// previous limit, the nearest it can.
	_ = e.SetAt(time.Now(), l, b)
}

// QuotaShare is a fallback's share of a calendar quota of n tokens: rounded
// down to a whole quantum, but at least a token (or n, if less), so that
// every instance can still admit a request of cost 1 however many share
// the quota.
func QuotaShare(n, share float64) float64 {
	b := math.Floor(n*share*fixedpoint.QuantaPerToken) / fixedpoint.QuantaPerToken
	return max(b, min(n, 1))
}

// RetuneQuota gives q share of a quota of n tokens per period of cal
// (QuotaShare), if it does not hold them already. What each key took
// stays (engine.Quota.SetQuota).
func RetuneQuota(q *engine.Quota, n float64, cal engine.Calendar, share float64) {
	b := QuotaShare(n, share)
	if q.Burst() == b && q.Calendar() == cal {
		return
	}
	// n and cal passed engine.CheckQuota, and so does b.
	_ = q.SetQuota(b, cal)
}

// RetuneWindow gives w share of a strict window's limit of n tokens
// (rounded as QuotaShare rounds a quota), if it does not hold it already.
// What each key took stays (engine.Window.SetLimitTokens).
func RetuneWindow(w *engine.Window, n, share float64) {
	b := QuotaShare(n, share)
	if w.Burst() == b {
		return
	}
	// n passed engine.CheckWindow, and so does b.
	_ = w.SetLimitTokens(b)
}
