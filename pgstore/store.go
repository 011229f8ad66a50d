package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/lease"
)

// StoreOptions configures NewStore; the zero value is usable.
type StoreOptions struct {
	// Table holds the buckets; "" picks DefaultTable. NewStore does not
	// create it: call Install first.
	Table string
	// Prefix starts every key of the store; a Spec's buckets are under
	// Prefix, its ID and ':'. Instances share buckets when they use the
	// same database, Table, Prefix and Specs.
	Prefix string
	// Timeout, BreakAfter and BreakFor are every Limiter's (Config): a
	// call that fails or runs out of time returns an error, and the
	// caller's failure policy (httplimit: each rule's fail_mode) decides.
	Timeout    time.Duration
	BreakAfter int
	BreakFor   time.Duration
	// FallbackShare, if not 0, decides calls with a local in-memory bucket
	// per key at this share of each Spec's rate and burst while the
	// database fails (Config.OnFailure Fallback).
	FallbackShare float64
	// FallbackMaxKeys bounds each Limiter's fallback buckets.
	FallbackMaxKeys int
	// SweepEvery is how often the store runs Sweep in the background, with
	// a random tenth added so that instances spread out: 0 picks 30 s,
	// negative never (another instance, or a scheduled job, sweeps).
	SweepEvery time.Duration
	// SweepBatch is Sweep's Batch.
	SweepBatch int
	// Logger receives sweep failures; nil discards them.
	Logger *slog.Logger
	// Lease, if not nil, makes every limiter of the store a leased one
	// (NewLeased) with these options: checks decided locally from leases
	// of the shared buckets, which are apart from the per-check ones
	// (every instance sharing the buckets must lease, or none).
	Lease *lease.Options
}

// Store is an engine.Store whose Limiters keep their buckets in PostgreSQL,
// so that processes sharing a database enforce one limit together, and
// which sweeps the table of full buckets in the background. Its Limiters
// decide a TakeAll together, atomically.
//
// The Limiters are not engine.Retuners: a Spec whose rate or burst changed
// gets a Limiter of its own whose buckets start full, as with redisstore,
// because instances sharing buckets reload at different moments.
type Store struct {
	*engine.Pool
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// NewStore returns a Store on db, which must be safe for concurrent use (a
// *pgxpool.Pool): the sweeper uses it beside the takes. It does not own db:
// close db after Close.
func NewStore(db DB, opts StoreOptions) (*Store, error) {
	sweep, err := opts.check()
	if err != nil {
		return nil, err
	}
	if isNil(db) {
		return nil, invalid("db must not be nil")
	}
	s := &Store{stop: make(chan struct{})}
	s.Pool = engine.NewPool(func(spec engine.Spec) (engine.Limiter, error) {
		l, err := New(db, opts.config(spec))
		if err != nil || opts.Lease == nil {
			return l, err
		}
		return leasedOf(l, *opts.Lease)
	})
	every := opts.SweepEvery
	if every == 0 {
		every = 30 * time.Second
	}
	if every > 0 {
		logger := opts.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		s.done.Add(1)
		go s.sweep(db, sweep, every, logger)
	}
	return s, nil
}

// Check returns nil if NewStore accepts o, or the error it would return
// (wrapping ErrInvalidConfig, naming the field), without a database.
func (o StoreOptions) Check() error {
	_, err := o.check()
	return err
}

func (o StoreOptions) check() (SweepOptions, error) {
	// With a limit every option combines with.
	if err := o.config(engine.Spec{ID: "probe", Limit: 1e9, Burst: 1e9}).Check(); err != nil {
		return SweepOptions{}, err
	}
	if o.Lease != nil {
		if err := o.Lease.Check(); err != nil {
			return SweepOptions{}, fmt.Errorf("%w: StoreOptions.Lease: %w", ErrInvalidConfig, err)
		}
	}
	return SweepOptions{Table: o.Table, Batch: o.SweepBatch}.resolve()
}

func (s *Store) sweep(db DB, o SweepOptions, every time.Duration, logger *slog.Logger) {
	defer s.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stop; cancel() }()
	for {
		t := time.NewTimer(every + rand.N(every/10+1))
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if n, err := Sweep(ctx, db, o); err != nil && ctx.Err() == nil {
			logger.Warn("pgstore: sweeping full buckets failed", "err", err, "removed", n)
		}
	}
}

// Close stops the sweeper and closes every bound Limiter.
func (s *Store) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.done.Wait()
	return s.Pool.Close()
}

// config is the Config of spec's Limiter.
func (o *StoreOptions) config(spec engine.Spec) Config {
	cfg := Config{
		Limit:      spec.Limit,
		Burst:      spec.Burst,
		Table:      o.Table,
		Prefix:     o.Prefix + strconv.Quote(spec.ID) + ":",
		Timeout:    o.Timeout,
		BreakAfter: o.BreakAfter,
		BreakFor:   o.BreakFor,
	}
	if o.FallbackShare != 0 {
		cfg.OnFailure, cfg.FallbackShare, cfg.FallbackMaxKeys = Fallback, o.FallbackShare, o.FallbackMaxKeys
	}
	return cfg
}
