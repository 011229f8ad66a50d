package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
)

var (
	slotsAcquireLua = newScript(slotsAcquireScript)
	slotsReleaseLua = newScript(slotsReleaseScript)
	slotsRenewLua   = newScript(slotsRenewScript)
)

// maxRenewKeys bounds the slots one renewal script renews: a longer list
// is cut into scripts that run at once (pipelined), so that no script
// keeps Redis busy for long.
const maxRenewKeys = 500

var _ engine.SlotStore = (*Store)(nil)

// BindSlots returns the in-flight Slots of name: a sorted set per key,
// under the store's Prefix, then name, then ":inflight", each holder a
// member scored by when its slot expires (Redis TIME in milliseconds),
// kept for StoreOptions.SlotTTL. Every instance with the same server,
// Prefix and name counts the same slots. Acquire is one script on the
// key's set, which removes the expired slots, counts and adds: Redis runs
// it alone, so the count is exact however many instances acquire. The
// set expires with its last slot. The calls have the Limiters' deadline
// and a breaker of their own (StoreOptions.Timeout, BreakAfter,
// BreakFor); their errors wrap engine.ErrUnavailable or
// engine.ErrOutcomeUnknown as Limiter.Take's do.
func (s *Store) BindSlots(name string) (engine.Slots, error) {
	if engine.CheckSlotName(name) != nil {
		return nil, invalid("an in-flight limit's name must be printable ASCII without spaces, not empty, got %q", name)
	}
	o := s.opts
	cfg := Config{Limit: 1, Burst: 1, Prefix: o.Prefix + escapeKey(name) + ":", Timeout: o.Timeout,
		BreakAfter: o.BreakAfter, BreakFor: o.BreakFor, OnFailure: FailClosed, MaxBatch: 1}
	l, err := newLimiter(s.c, cfg)
	if err != nil {
		return nil, err
	}
	l.s.keyBase = l.s.Prefix + "inflight"
	l.escape = true
	ttl := o.slotTTL().Truncate(time.Millisecond)
	return &Slots{l: l, ttl: ttl, ttlMS: strconv.FormatInt(ttl.Milliseconds(), 10)}, nil
}

// Slots are the in-flight slots of one limit in Redis (engine.Slots); see
// Store.BindSlots. They are safe for concurrent use.
type Slots struct {
	// l gives the keys (KeyFor), the deadline, the breaker and the
	// classification of errors.
	l     *Limiter
	ttl   time.Duration
	ttlMS string
}

var _ engine.Slots = (*Slots)(nil)

// Acquire is engine.Slots.Acquire: one script, at Redis's clock. An error
// took no slot, or one that expires after TTL (engine.ErrOutcomeUnknown).
func (s *Slots) Acquire(ctx context.Context, key, holder string, max int) (bool, int, error) {
	if err := engine.CheckSlotCall(holder, max); err != nil {
		return false, 0, err
	}
	v, err := s.call(ctx, slotsAcquireLua, []string{s.l.KeyFor(key)}, []string{holder, strconv.Itoa(max), s.ttlMS})
	if err != nil {
		return false, 0, err
	}
	if len(v) != 2 {
		return false, 0, storeError(errReply, false, false)
	}
	return v[0] == 1, int(v[1]), nil
}

// Release is engine.Slots.Release: one script.
func (s *Slots) Release(ctx context.Context, key, holder string) error {
	if err := engine.CheckSlotCall(holder, 1); err != nil {
		return err
	}
	_, err := s.call(ctx, slotsReleaseLua, []string{s.l.KeyFor(key)}, []string{holder})
	return err
}

// Renew is engine.Slots.Renew: one script for every maxRenewKeys slots
// (and, on a cluster, every hash slot), sent at once.
func (s *Slots) Renew(ctx context.Context, held []engine.SlotHold) error {
	for _, h := range held {
		if err := engine.CheckSlotCall(h.Holder, 1); err != nil {
			return err
		}
	}
	type batch struct{ keys, args []string }
	var batches []*batch
	open := map[int]*batch{} // by hash slot, on a cluster; else all in 0
	for _, h := range held {
		k := s.l.KeyFor(h.Key)
		group := 0
		if s.l.c.sharded() {
			group = slotOf(k)
		}
		b := open[group]
		if b == nil || len(b.keys) == maxRenewKeys {
			b = &batch{args: []string{s.ttlMS}}
			open[group] = b
			batches = append(batches, b)
		}
		b.keys, b.args = append(b.keys, k), append(b.args, h.Holder)
	}
	if len(batches) == 1 {
		_, err := s.call(ctx, slotsRenewLua, batches[0].keys, batches[0].args)
		return err
	}
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.call(ctx, slotsRenewLua, b.keys, b.args)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TTL is StoreOptions.SlotTTL, as set or defaulted.
func (s *Slots) TTL() time.Duration { return s.ttl }

// Close ends the Slots' use; the slots they took stay held until released
// or expired.
func (s *Slots) Close() error { return s.l.Close() }

// call runs a slot script under the deadline and breaker, with the
// store's classification of errors: engine.ErrUnavailable when it
// certainly did not run, engine.ErrOutcomeUnknown otherwise.
func (s *Slots) call(ctx context.Context, sc script, keys, args []string) ([]int64, error) {
	v, err := s.l.call(ctx, sc, keys, args)
	if err != nil {
		return nil, storeError(err, remote.IsUnsent(err), false)
	}
	return v, nil
}
