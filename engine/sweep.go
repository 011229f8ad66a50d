package engine

import (
	"time"

	"github.com/faucetgo/faucet/internal/shard"
)

// SweepAt evicts every bucket that is full at time t, one shard at a time,
// and returns how many it evicted (the overflow bucket of FullShare is swept
// too, but not counted). Eviction is lossless: only full buckets go, and a
// full bucket is what a new key starts with. A later call with a time before
// t sees an evicted key as full at t, and a new key of the same shard as
// created no earlier than t.
//
// Sweeps only free memory: an engine that is never swept decides alike. An
// engine on a virtual clock (SweepInterval < 0) calls SweepAt as often as it
// wants its memory back.
func (e *Engine) SweepAt(t time.Time) int {
	ns := e.nanosAt(t)
	n := 0
	for i := range e.table.Shards() {
		n += e.sweepShard(i, ns)
	}
	e.sweepOverflow(ns)
	return n
}

func (e *Engine) sweepShard(i int, ns int64) int {
	g := e.current()
	n := e.table.Sweep(i, func(b *shard.Bucket) (bool, int64) {
		evicted, at, _ := e.evictIfFull(g, b, ns)
		return evicted, at
	})
	if n > 0 {
		e.evicted.Add(uint64(n))
		e.live.Add(-int64(n))
	}
	return n
}

// sweeper is the background sweeper: every sweepEvery it sweeps each shard in
// turn at the engine's monotonic clock, reading the clock afresh per shard so
// that a long sweep never judges fullness at a stale time.
func (e *Engine) sweeper() {
	defer close(e.done)
	tk := time.NewTicker(e.sweepEvery)
	defer tk.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tk.C:
		}
		if e.epoch.Load() == nil {
			continue // nothing has happened yet
		}
		for i := range e.table.Shards() {
			select {
			case <-e.stop:
				return
			default:
			}
			e.sweepShard(i, e.nanosNow())
		}
		e.sweepOverflow(e.nanosNow())
	}
}
