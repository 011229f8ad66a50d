package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
	"github.com/faucetgo/faucet/internal/remote"
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
	// FallbackShare is the share of each Spec's rate and burst that a
	// local in-memory bucket per key decides calls with while the database
	// fails (Config.OnFailure Fallback), in (0, 1]. 0 picks 1/N, N the
	// instances the heartbeats counted last (Peers), or 1 before the
	// database first answered one. Every Limiter of a Store falls back:
	// a failure never lifts the limit, and the caller may still choose to
	// (httplimit: a rule's fail_mode "open").
	FallbackShare float64
	// FallbackMaxKeys bounds each Limiter's fallback buckets.
	FallbackMaxKeys int
	// SweepEvery is how often the store runs Sweep in the background, with
	// a random tenth added so that instances spread out: 0 picks 30 s,
	// negative never (another instance, or a scheduled job, sweeps).
	SweepEvery time.Duration
	// Heartbeat is how often the instance records itself in the table, so
	// that every instance finds N for FallbackShare 0: 0 picks 1 s,
	// negative never (N stays 1). An instance counts as alive for five
	// heartbeats after its last, by the database's clock.
	Heartbeat time.Duration
	// SweepBatch is Sweep's Batch.
	SweepBatch int
	// Logger receives sweep failures; nil discards them.
	Logger *slog.Logger
	// Lease, if not nil, makes every limiter of the store a leased one
	// (NewLeased) with these options: checks decided locally from leases
	// of the shared buckets, which are apart from the per-check ones
	// (every instance sharing the buckets must lease, or none).
	Lease *lease.Options
	// SlotTTL is how long an in-flight slot (BindSlots) stays held without
	// a renewal: 0 picks engine.DefaultSlotTTL (30 s), else 1 s to 1 h. A
	// holder renews about every SlotTTL/3; an instance that dies frees its
	// slots SlotTTL after their last renewal.
	SlotTTL time.Duration
}

// slotTTL is SlotTTL, defaulted.
func (o *StoreOptions) slotTTL() time.Duration { return cmp.Or(o.SlotTTL, engine.DefaultSlotTTL) }

// Store is an engine.Store whose Limiters keep their buckets in PostgreSQL,
// so that processes sharing a database enforce one limit together, and
// which sweeps the table of full buckets in the background. Its Limiters
// decide a TakeAll together, atomically.
//
// A Spec with a Calendar gets a Quota (see Quota), unless opts.Lease is
// set: a store with leases refuses quotas. Quotas are retuned in place
// (Quota.SetQuota, engine.QuotaRetuner), keeping what each key used.
// Likewise a Spec with a Window gets a Window (see Window), which a store
// with leases refuses; Binds of its ID with the same span and slots share
// it, retuned in place (Window.SetLimitTokens, engine.WindowRetuner).
//
// The Limiters are not engine.Retuners: a Spec whose rate or burst changed
// gets a Limiter of its own whose buckets start full, as with redisstore,
// because instances sharing buckets reload at different moments.
type Store struct {
	*engine.Pool
	bg *remote.Background
	// db and opts open the Slots of BindSlots.
	db   DB
	opts StoreOptions
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
	s := &Store{bg: remote.NewBackground(), db: db, opts: opts}
	s.Pool = engine.NewPool(func(spec engine.Spec) (engine.Limiter, error) {
		if spec.Window > 0 {
			if opts.Lease != nil {
				return nil, windowRefused(spec)
			}
			return newWindow(db, &opts, spec, s.bg.Peers())
		}
		if spec.Calendar != nil {
			if opts.Lease != nil {
				return nil, quotaRefused(spec)
			}
			return newQuota(db, &opts, spec, s.bg.Peers())
		}
		l, err := New(db, opts.config(spec, s.bg.Peers()))
		if err != nil || opts.Lease == nil {
			return l, err
		}
		return leasedOf(l, *opts.Lease)
	})
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	every := opts.SweepEvery
	if every == 0 {
		every = 30 * time.Second
	}
	if every > 0 {
		s.bg.Go(func(stop <-chan struct{}) { sweepEvery(stop, db, sweep, every, logger) })
	}
	s.bg.Heartbeat(opts.Heartbeat, cmp.Or(opts.Timeout, DefaultTimeout), func(every time.Duration) failpolicy.Beat {
		return heartbeat(db, cmp.Or(opts.Table, DefaultTable), opts.Prefix, every)
	})
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
	if err := o.config(remote.ProbeSpec, &failpolicy.Peers{}).Check(); err != nil {
		return SweepOptions{}, err
	}
	if o.Lease != nil {
		if err := o.Lease.Check(); err != nil {
			return SweepOptions{}, fmt.Errorf("%w: StoreOptions.Lease: %w", ErrInvalidConfig, err)
		}
	}
	if t := o.SlotTTL; t != 0 && (t < engine.MinSlotTTL || t > engine.MaxSlotTTL) {
		return SweepOptions{}, invalid("SlotTTL must be 0 (default %v) or from %v to %v, got %v",
			engine.DefaultSlotTTL, engine.MinSlotTTL, engine.MaxSlotTTL, t)
	}
	return SweepOptions{Table: o.Table, Batch: o.SweepBatch}.resolve()
}

// sweepEvery runs Sweep every `every` and a random tenth, until stop is
// closed.
func sweepEvery(stop <-chan struct{}, db DB, o SweepOptions, every time.Duration, logger *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	for {
		t := time.NewTimer(every + rand.N(every/10+1))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		if n, err := Sweep(ctx, db, o); err != nil && ctx.Err() == nil {
			logger.Warn("pgstore: sweeping full buckets failed", "err", err, "removed", n)
		}
	}
}

// Peers returns the instances sharing the store as the heartbeats last
// counted them: the N of FallbackShare 0.
func (s *Store) Peers() *Peers { return s.bg.Peers() }

// Close stops the sweeper and closes every bound Limiter.
func (s *Store) Close() error {
	s.bg.Stop()
	return s.Pool.Close()
}

// quoteID is a Spec's ID in its rows' keys.
func quoteID(id string) string { return strconv.Quote(id) }

// config is the Config of spec's Limiter, whose fallback follows peers
// unless FallbackShare fixes its share.
func (o *StoreOptions) config(spec engine.Spec, peers *failpolicy.Peers) Config {
	cfg := Config{
		Limit:      spec.Limit,
		Burst:      spec.Burst,
		Table:      o.Table,
		Prefix:     o.Prefix + quoteID(spec.ID) + ":",
		Timeout:    o.Timeout,
		BreakAfter: o.BreakAfter,
		BreakFor:   o.BreakFor,
	}
	cfg.OnFailure, cfg.FallbackShare, cfg.FallbackMaxKeys = Fallback, o.FallbackShare, o.FallbackMaxKeys
	if o.FallbackShare == 0 {
		cfg.FallbackPeers = peers
	}
	return cfg
}
