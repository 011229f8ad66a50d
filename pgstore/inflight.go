package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
)

var _ engine.SlotStore = (*Store)(nil)

// BindSlots returns the in-flight Slots of name: rows of Table_slots (see
// Install), one per slot held, keyed by the store's Prefix, name's quoted
// form, ":inflight:" and the request's key, each with its holder and the
// microsecond of the database's clock it expires at, StoreOptions.SlotTTL
// after its acquire or last renewal. Every instance with the same
// database, Table, Prefix and name counts the same slots. Acquire is one
// statement, a function that takes an advisory lock of the key's hash
// before it reads the clock and counts: acquires of a key take turns, and
// each counts every slot the ones before it took, so the count is exact
// however many instances acquire. It deletes the key's expired slots on
// the way; the store's sweeper removes those of keys no acquire passes
// over. The calls have the Limiters' deadline and a breaker of their own
// (StoreOptions.Timeout, BreakAfter, BreakFor); their errors wrap
// engine.ErrUnavailable or engine.ErrOutcomeUnknown as Limiter.Take's do.
// A schema installed before slots lacks the table (CheckSlots), and every
// call fails until Install runs again.
func (s *Store) BindSlots(name string) (engine.Slots, error) {
	if engine.CheckSlotName(name) != nil {
		return nil, invalid("an in-flight limit's name must be printable ASCII without spaces, not empty, got %q", name)
	}
	o := s.opts
	// Refused while the schema has no slots: every Acquire would fail.
	ctx, cancel := context.WithTimeout(context.Background(), bindCheckTimeout)
	defer cancel()
	if err := CheckSlots(ctx, s.db, o.Table); err != nil {
		return nil, err
	}
	cfg := Config{Limit: 1, Burst: 1, Table: o.Table, Prefix: o.Prefix + quoteID(name) + ":",
		Timeout: o.Timeout, BreakAfter: o.BreakAfter, BreakFor: o.BreakFor, OnFailure: FailClosed}
	l, err := New(s.db, cfg)
	if err != nil {
		return nil, err
	}
	l.s.keyBase = l.s.Prefix + "inflight:"
	table := l.s.Table
	ttl := o.slotTTL().Truncate(time.Microsecond)
	return &Slots{l: l, ttl: ttl,
		acquire: "SELECT * FROM " + ident(table+"_slots_acquire") + "($1, $2, $3, $4)",
		release: "SELECT " + ident(table+"_slots_release") + "($1, $2)",
		renew:   "SELECT " + ident(table+"_slots_renew") + "($1, $2, $3)",
	}, nil
}

// bindCheckTimeout bounds BindSlots' check of the schema: it runs when
// rules load, not per request.
const bindCheckTimeout = 10 * time.Second

// Slots are the in-flight slots of one limit in PostgreSQL (engine.Slots);
// see Store.BindSlots. They are safe for concurrent use.
type Slots struct {
	// l gives the keys (KeyFor), the deadline, the breaker and the
	// classification of errors.
	l   *Limiter
	ttl time.Duration
	// The statements, for the store's Table.
	acquire, release, renew string
}

var _ engine.Slots = (*Slots)(nil)

// Acquire is engine.Slots.Acquire: one statement, at the database's
// clock. An error took no slot, or one that expires after TTL
// (engine.ErrOutcomeUnknown).
func (s *Slots) Acquire(ctx context.Context, key, holder string, max int) (bool, int, error) {
	if err := engine.CheckSlotCall(holder, max); err != nil {
		return false, 0, err
	}
	var ok bool
	var held int64
	err := s.l.query(ctx, s.acquire, []any{[]byte(s.l.KeyFor(key)), []byte(holder), int32(min(max, 1<<31-1)), s.ttl.Microseconds()}, &ok, &held)
	if err != nil {
		return false, 0, storeError(err, false, false)
	}
	return ok, int(held), nil
}

// Release is engine.Slots.Release: one statement.
func (s *Slots) Release(ctx context.Context, key, holder string) error {
	if err := engine.CheckSlotCall(holder, 1); err != nil {
		return err
	}
	var n int64
	if err := s.l.query(ctx, s.release, []any{[]byte(s.l.KeyFor(key)), []byte(holder)}, &n); err != nil {
		return storeError(err, false, false)
	}
	return nil
}

// Renew is engine.Slots.Renew: one statement for them all.
func (s *Slots) Renew(ctx context.Context, held []engine.SlotHold) error {
	if len(held) == 0 {
		return nil
	}
	keys, holders := make([][]byte, len(held)), make([][]byte, len(held))
	for i, h := range held {
		if err := engine.CheckSlotCall(h.Holder, 1); err != nil {
			return err
		}
		keys[i], holders[i] = []byte(s.l.KeyFor(h.Key)), []byte(h.Holder)
	}
	var n int64
	if err := s.l.query(ctx, s.renew, []any{keys, holders, s.ttl.Microseconds()}, &n); err != nil {
		return storeError(err, false, false)
	}
	return nil
}

// TTL is StoreOptions.SlotTTL, as set or defaulted.
func (s *Slots) TTL() time.Duration { return s.ttl }

// Close ends the Slots' use; the slots they took stay held until released
// or expired.
func (s *Slots) Close() error { return s.l.Close() }

// slotTables and slotFuncs are the names of the table and functions
// in-flight slots add to a schema, after Table.
var slotTables, slotFuncs = []string{"_slots"}, []string{"_slots_acquire", "_slots_release", "_slots_renew"}

// CheckSlots reports whether the objects that in-flight slots need
// (BindSlots) exist beside table (DefaultTable if "") in db, as Check
// does for per-check ones, which it checks first. A schema that Install
// created before slots existed lacks them, and Install adds them, keeping
// every bucket; until then the limiters work and the slots' calls fail.
func CheckSlots(ctx context.Context, db DB, table string) error {
	if table == "" {
		table = DefaultTable
	}
	if err := Check(ctx, db, table); err != nil {
		return err
	}
	var missing []string
	for _, t := range slotTables {
		var ok bool
		if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, ident(table+t)).Scan(&ok); err != nil {
			return fmt.Errorf("pgstore: checking the slot schema of %s: %w", table, err)
		}
		if !ok {
			missing = append(missing, table+t)
		}
	}
	for _, f := range slotFuncs {
		var ok bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = $1 AND pg_function_is_visible(oid))`,
			table+f).Scan(&ok); err != nil {
			return fmt.Errorf("pgstore: checking the slot schema of %s: %w", table, err)
		}
		if !ok {
			missing = append(missing, table+f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("pgstore: the schema of table %s predates in-flight slots (missing %s): run Install again (faucet serve --postgres-install) or the statements of SQL; it adds them and keeps every bucket", table, strings.Join(missing, ", "))
	}
	return nil
}

// sweepSlots removes the in-flight slots of o.Table expired for
// sweepMargin, o.Batch rows per statement, skipping rows a call holds
// locked. A schema installed before slots has none to sweep.
func sweepSlots(ctx context.Context, db DB, o SweepOptions) (removed int64, err error) {
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, ident(o.Table+"_slots")).Scan(&exists); err != nil || !exists {
		if err != nil {
			err = fmt.Errorf("pgstore: sweep %s_slots: %w", o.Table, err)
		}
		return 0, err
	}
	sql := render(statementText("background.sql", "sweep_slots"), Schema{Table: o.Table})
	for {
		var gone int64
		err := func() error {
			bctx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			return db.QueryRow(bctx, sql, o.Batch, sweepMargin.Microseconds()).Scan(&gone)
		}()
		if err != nil {
			return removed, fmt.Errorf("pgstore: sweep %s_slots: %w", o.Table, err)
		}
		removed += gone
		if gone < int64(o.Batch) {
			return removed, nil
		}
	}
}
