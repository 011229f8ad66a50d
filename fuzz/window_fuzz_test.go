package fuzz

import (
	"math"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// windowModel is the exact reference of a strict window (engine.Window):
// per key, its newest slot and what it took in each slot, and the slot of
// the latest sweep, where a new key's timeline starts.
type windowModel struct {
	capacity  uint64
	slots     int64 // k
	slotNs    int64
	keys      map[string]*windowKeyModel
	watermark int64
	// log is every admission still counted, by key: its slot and cost,
	// to check the promise itself, not only the model.
	log map[string]map[int64]uint64
}

type windowKeyModel struct {
	newest int64
	counts map[int64]uint64
}

func (m *windowModel) slotOf(ns int64) int64 {
	s := ns / m.slotNs
	if ns%m.slotNs < 0 {
		s--
	}
	return s
}

// view is key's state as a take at ns sees it, without changing the model:
// the slot it counts in, and the sum over that slot and the k before.
func (m *windowModel) view(key string, ns int64) (k *windowKeyModel, slot int64, sum uint64) {
	k, ok := m.keys[key]
	if !ok {
		k = &windowKeyModel{newest: m.watermark, counts: map[int64]uint64{}}
	}
	slot = max(m.slotOf(ns), k.newest)
	if k.newest == math.MinInt64 {
		slot = m.slotOf(ns)
	}
	for i := slot - m.slots; i <= slot; i++ {
		sum += k.counts[i]
	}
	return k, slot, sum
}

func (m *windowModel) decide(key string, ns int64, cost uint64, never bool) (engine.Decision, bool) {
	k, slot, sum := m.view(key, ns)
	until := func(extra uint64) time.Duration {
		for i := slot; i >= slot-m.slots; i-- {
			c := k.counts[i]
			if i == slot {
				c += extra
			}
			if c != 0 {
				return max(time.Duration((i+m.slots+1)*m.slotNs-ns), 0)
			}
		}
		return 0
	}
	if never || sum+cost > m.capacity {
		d := engine.Decision{Remaining: float64(m.capacity-min(sum, m.capacity)) / 1000, ResetAfter: until(0)}
		if never || cost > m.capacity {
			d.RetryAfter = engine.InfDuration
			return d, false
		}
		freed := uint64(0)
		for i := slot - m.slots; i <= slot; i++ {
			freed += k.counts[i]
			if sum-freed+cost <= m.capacity {
				d.RetryAfter = max(time.Duration((i+m.slots+1)*m.slotNs-ns), 1)
				return d, false
			}
		}
		d.RetryAfter = d.ResetAfter
		return d, false
	}
	d := engine.Decision{Allowed: true, Remaining: float64(m.capacity-sum-cost) / 1000}
	if sum+cost > 0 {
		d.ResetAfter = until(cost)
	}
	return d, cost > 0
}

// touch creates key's state, as any take that may take does.
func (m *windowModel) touch(key string) {
	if _, ok := m.keys[key]; !ok {
		m.keys[key] = &windowKeyModel{newest: m.watermark, counts: map[int64]uint64{}}
	}
}

func (m *windowModel) take(key string, ns int64, cost uint64) {
	m.touch(key)
	k, slot, _ := m.view(key, ns)
	// Slots that leave the window are forgotten, as the engine's ring
	// forgets them.
	for i := range k.counts {
		if i < slot-m.slots {
			delete(k.counts, i)
		}
	}
	k.newest = slot
	k.counts[slot] += cost
	if m.log[key] == nil {
		m.log[key] = map[int64]uint64{}
	}
	m.log[key][slot] += cost
}

func (m *windowModel) advance(key string, ns int64) {
	m.touch(key)
	k, slot, _ := m.view(key, ns)
	for i := range k.counts {
		if i < slot-m.slots {
			delete(k.counts, i)
		}
	}
	k.newest = slot
}

func (m *windowModel) sweep(ns int64) int {
	s := m.slotOf(ns)
	m.watermark = max(m.watermark, s)
	n := 0
	for key, k := range m.keys {
		if k.newest == math.MinInt64 || s-k.newest > m.slots {
			delete(m.keys, key)
			n++
		}
	}
	return n
}

// FuzzWindow holds engine.Window to windowModel, exactly, over scripts of
// takes, all-or-none pairs, sweeps and peeks on a clock that jumps and
// steps back, and checks the promise on every key's log:
//
//	W1 every Decision is the model's, field by field
//	W2 no Slots+1 consecutive slots of a key's timeline (which hold any
//	   span of Window) ever hold more than Limit
//	W3 a TakeAllAt of two keys takes from both or neither
//	W4 a sweep removes exactly the keys whose counts all left the window
func FuzzWindow(f *testing.F) {
	f.Add(uint8(0), []byte{0, 1, 2, 0, 0, 1, 2, 0, 0, 1, 2, 0, 0, 4, 2, 0, 0, 9, 2, 0})
	f.Add(uint8(5), []byte{0, 0, 3, 1, 1, 5, 3, 2, 2, 6, 4, 3, 3, 8, 2, 4, 0, 10, 2, 0, 0, 11, 1, 1})
	f.Add(uint8(10), []byte{4, 3, 2, 0, 0, 7, 2, 0, 0, 0, 4, 0, 6, 12, 0, 0, 0, 13, 2, 0, 0, 0, 2, 0})
	f.Add(uint8(15), []byte{0, 0, 4, 0, 6, 6, 0, 0, 0, 9, 2, 0, 6, 14, 0, 0, 1, 10, 2, 0, 1, 0, 3, 0})
	f.Fuzz(func(t *testing.T, sel uint8, script []byte) {
		limits := [...]float64{1, 5, 100.5, 4e6}
		slotChoices := [...]int{1, 3, 16, 64}
		limit, slots := limits[sel%4], slotChoices[(sel>>2)%4]
		span := [...]time.Duration{time.Second, time.Minute, 24 * time.Hour, 7 * time.Second}[(sel>>4)%4]
		w, err := engine.NewWindow(engine.WindowConfig{Limit: limit, Window: span, Slots: slots, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		slotNs := int64(span) / int64(slots)
		if slotNs*int64(slots) < int64(span) {
			slotNs++
		}
		m := &windowModel{capacity: uint64(math.Round(limit * 1000)), slots: int64(slots), slotNs: slotNs,
			keys: map[string]*windowKeyModel{}, watermark: math.MinInt64, log: map[string]map[int64]uint64{}}
		steps := [...]time.Duration{0, 1, time.Millisecond, span / 7, span / 2, span, span + 1, 3 * span,
			-1, -span / 3, -span, -2 * span, 400 * time.Millisecond, time.Hour, -time.Hour, 17 * time.Second}
		capQ := m.capacity
		costs := [...]uint64{0, 1, 1000, capQ / 2, capQ, capQ + 1, math.MaxUint64, 3}
		keys := [...]string{"a", "b", "c"}
		ns := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC).UnixNano()
		for i := 0; i+4 <= len(script) && i < 4*64; i += 4 {
			op, step, costSel := script[i], script[i+1], script[i+2]
			ns += int64(steps[step%16])
			at := time.Unix(0, ns)
			key := keys[int(op>>4)%3]
			cost := costs[costSel%8]
			n := float64(cost) / 1000
			never := cost == math.MaxUint64
			if never {
				n = -1
			}
			switch op % 8 {
			case 0, 1, 2, 3:
				want, takes := m.decide(key, ns, cost, never)
				got := w.TakeAt(at, key, n)
				if got != want {
					t.Fatalf("op %d: TakeAt(%v, %q, %v) = %+v, want %+v", i/4, at.UTC(), key, n, got, want)
				}
				switch {
				case takes:
					m.take(key, ns, cost)
				case !never && cost <= m.capacity:
					m.advance(key, ns)
				}
			case 4, 5:
				other := keys[(int(op>>4)+1)%3]
				wa, _ := m.decide(key, ns, cost, never)
				takes := []engine.Take{{Limiter: w, Key: key, N: n}, {Limiter: w, Key: other, N: 1}}
				out := make([]engine.Decision, 2)
				denied, err := w.TakeAllAt(at, takes, out)
				if err != nil {
					t.Fatal(err)
				}
				if never || cost > m.capacity {
					if denied != 0 {
						t.Fatalf("op %d: a cost that can never pass: denied %d", i/4, denied)
					}
					continue
				}
				// The first is held (and the model takes it, to decide
				// the second as the engine does), then the second.
				if !wa.Allowed {
					m.advance(key, ns)
					if denied != 0 || out[0] != wa {
						t.Fatalf("op %d: TakeAllAt = %d %+v, want 0 %+v", i/4, denied, out, wa)
					}
					continue
				}
				if wa.Allowed && cost > 0 {
					m.take(key, ns, cost)
				} else {
					m.advance(key, ns)
				}
				wb, tb := m.decide(other, ns, 1000, false)
				if wb.Allowed {
					if denied != -1 || out[0] != wa || out[1] != wb {
						t.Fatalf("op %d: TakeAllAt = %d %+v, want -1 %+v %+v", i/4, denied, out, wa, wb)
					}
					if tb {
						m.take(other, ns, 1000)
					}
					continue
				}
				m.advance(other, ns)
				if denied != 1 || out[1] != wb {
					t.Fatalf("op %d: TakeAllAt = %d %+v, want 1 and %+v", i/4, denied, out, wb)
				}
				// Given back: the first take's cost leaves its slot.
				if cost > 0 {
					k := m.keys[key]
					k.counts[k.newest] -= cost
					m.log[key][k.newest] -= cost
				}
				if _, _, sum := m.view(key, ns); out[0].Remaining != float64(m.capacity-sum)/1000 {
					t.Fatalf("op %d: given back, %v left, want %v", i/4, out[0].Remaining, float64(m.capacity-sum)/1000)
				}
			case 6:
				if got, want := w.SweepAt(at), m.sweep(ns); got != want {
					t.Fatalf("op %d: SweepAt removed %d, want %d", i/4, got, want)
				}
				if w.Len() != len(m.keys) {
					t.Fatalf("op %d: %d keys, want %d", i/4, w.Len(), len(m.keys))
				}
			default:
				want, _ := m.decide(key, ns, 0, false)
				if got := w.TakeAt(at, key, 0); got != want {
					t.Fatalf("op %d: peek = %+v, want %+v", i/4, got, want)
				}
				m.advance(key, ns)
			}
			for key, log := range m.log {
				for s := range log {
					var sum uint64
					for j := s; j <= s+m.slots; j++ {
						sum += log[j]
					}
					if sum > m.capacity {
						t.Fatalf("op %d: key %q took %d quanta in slots %d..%d, more than %d", i/4, key, sum, s, s+m.slots, m.capacity)
					}
				}
			}
		}
	})
}
