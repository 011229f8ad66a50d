package engine

import (
	"crypto/rand"
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// Engine is a keyed token-bucket rate limiter: one bucket per key, each
// holding at most Burst tokens, starting full and refilling continuously at
// Limit tokens per second.
//
// All methods are safe for simultaneous use by multiple goroutines. The zero
// Engine is not usable; call New. An Engine must not be copied after first
// use.
type Engine struct {
	// gen is the generation in force: Limit, Burst, and the layout of the
	// buckets' words. SetAt replaces it whole, under setMu.
	gen   atomic.Pointer[generation]
	setMu sync.Mutex
	table *shard.Table
	// epoch is the first time the engine was given (or read from the clock);
	// ticks count from it. Set once, by CompareAndSwap from nil.
	epoch atomic.Pointer[time.Time]

	maxKeys    int64
	onFull     FullPolicy
	sweepEvery time.Duration
	// spill holds the overflow bucket of the keys that find the table full
	// (FullShare); see overflow.go.
	spill spillBucket

	allowed, denied counter
	evicted         atomic.Uint64
	overflow        atomic.Uint64
	// live counts buckets in the table. With MaxKeys it is incremented
	// before a bucket is inserted (a reservation), so it never exceeds
	// MaxKeys, and decremented after one is evicted.
	live atomic.Int64
	// noEvictBefore is a time (nanoseconds since the epoch) before which a
	// capacity eviction scan is known to be futile: the last scan found no
	// full bucket, and none of those it saw fills up earlier.
	noEvictBefore atomic.Int64

	stop      chan struct{} // closed by Close: stops the sweeper
	done      chan struct{} // closed when the sweeper has exited
	closeOnce sync.Once
}

// New returns an Engine for cfg, or an error wrapping ErrInvalidConfig that
// names the first invalid field and its allowed range. Unless
// cfg.SweepInterval is negative it starts a background sweeper; Close stops
// it.
func New(cfg Config) (*Engine, error) {
	l, err := cfg.layout()
	if err != nil {
		return nil, err
	}
	shards, err := cfg.shards(runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, err
	}
	sweep, err := cfg.sweepInterval()
	if err != nil {
		return nil, err
	}
	maxKeys, err := cfg.maxKeys()
	if err != nil {
		return nil, err
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
	e := &Engine{
		table:      shard.NewTable(shards, binary.LittleEndian.Uint64(seed[:])),
		maxKeys:    maxKeys,
		onFull:     cfg.OnFull,
		sweepEvery: sweep,
		allowed:    newCounter(),
		denied:     newCounter(),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	e.gen.Store(&generation{layout: l, limit: cfg.Limit, burst: cfg.Burst, since: math.MinInt64, fullAt: math.MinInt64})
	e.spill.init()
	if sweep > 0 {
		go e.sweeper()
	} else {
		close(e.done)
	}
	return e, nil
}

// Close stops the background sweeper and waits for it to exit. It is
// idempotent and always returns nil. The engine keeps working after Close;
// only sweeping stops.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() { close(e.stop) })
	<-e.done
	return nil
}

// Len returns the number of live buckets. It never creates one.
func (e *Engine) Len() int { return int(e.live.Load()) }

// Limit returns the engine's refill rate.
func (e *Engine) Limit() Limit { return e.current().limit }

// Burst returns the engine's bucket capacity in tokens.
func (e *Engine) Burst() float64 { return e.current().burst }

// Precision returns the fixed-point units chosen for the engine's Burst.
func (e *Engine) Precision() Precision {
	l := e.current().layout
	return Precision{
		Quantum: 1.0 / fixedpoint.QuantaPerToken,
		Tick:    time.Duration(l.TickNanos()),
		Horizon: time.Duration(l.HorizonNanos()),
	}
}
