package limitertest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/engine/limitertest"
)

// memSlots is a reference SlotStore in memory: every store opened on one
// table shares its slots, as instances sharing a server do.
type memSlots struct {
	*engine.Pool
	t   *table
	ttl time.Duration
}

// table holds the slots: name and key to holder to expiry.
type table struct {
	mu    sync.Mutex
	slots map[[2]string]map[string]time.Time
}

func (m *memSlots) BindSlots(name string) (engine.Slots, error) {
	if err := engine.CheckSlotName(name); err != nil {
		return nil, err
	}
	return &memBound{m: m, name: name}, nil
}

type memBound struct {
	m    *memSlots
	name string
}

// live returns key's holders, without the expired, under mu.
func (b *memBound) live(key string, now time.Time) map[string]time.Time {
	k := [2]string{b.name, key}
	hs := b.m.t.slots[k]
	if hs == nil {
		hs = map[string]time.Time{}
		b.m.t.slots[k] = hs
	}
	for h, exp := range hs {
		if !now.Before(exp) {
			delete(hs, h)
		}
	}
	return hs
}

func (b *memBound) Acquire(_ context.Context, key, holder string, max int) (bool, int, error) {
	if err := engine.CheckSlotCall(holder, max); err != nil {
		return false, 0, err
	}
	b.m.t.mu.Lock()
	defer b.m.t.mu.Unlock()
	now := time.Now()
	hs := b.live(key, now)
	if _, ok := hs[holder]; ok || len(hs) < max {
		hs[holder] = now.Add(b.m.ttl)
		return true, len(hs), nil
	}
	return false, len(hs), nil
}

func (b *memBound) Release(_ context.Context, key, holder string) error {
	if err := engine.CheckSlotCall(holder, 1); err != nil {
		return err
	}
	b.m.t.mu.Lock()
	defer b.m.t.mu.Unlock()
	delete(b.live(key, time.Now()), holder)
	return nil
}

func (b *memBound) Renew(_ context.Context, held []engine.SlotHold) error {
	for _, h := range held {
		if err := engine.CheckSlotCall(h.Holder, 1); err != nil {
			return err
		}
	}
	b.m.t.mu.Lock()
	defer b.m.t.mu.Unlock()
	now := time.Now()
	for _, h := range held {
		hs := b.live(h.Key, now)
		if _, ok := hs[h.Holder]; ok {
			hs[h.Holder] = now.Add(b.m.ttl)
		}
	}
	return nil
}

func (b *memBound) TTL() time.Duration { return b.m.ttl }
func (b *memBound) Close() error       { return nil }

// The suite passes a correct store: its own check.
func TestRunSlotsReference(t *testing.T) {
	tab := &table{slots: map[[2]string]map[string]time.Time{}}
	limitertest.RunSlots(t, limitertest.SlotHarness{
		Open: func(t *testing.T) engine.SlotStore {
			return &memSlots{Pool: engine.NewEnginePool(engine.Config{}), t: tab, ttl: time.Second}
		},
	})
}
