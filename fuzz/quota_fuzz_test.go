package fuzz

import (
	"math"
	"testing"
	"time"
	_ "time/tzdata" // the model's zones, whatever the machine has

	"github.com/faucetgo/faucet/engine"
)

// quotaModel is the exact reference of a calendar quota (engine.Quota): per
// key, what it took in its period and when the period ends (in quarter
// hours, unbounded: the model never wraps), and
// the watermark a sweep leaves (the latest end of a removed period).
type quotaModel struct {
	capacity  uint64 // quanta
	own       engine.Calendar
	keys      map[string]*quotaKey
	watermark int64 // Unix ns; MinInt64: none
}

type quotaKey struct {
	used uint64
	endQ int64
}

// quarter is the unit of a period's end.
const quarter = int64(15 * time.Minute)

func floorQuarter(ns int64) int64 {
	m := ns / quarter
	if ns%quarter < 0 {
		m--
	}
	return m
}

func ceilQuarter(ns int64) int64 { return -floorQuarter(-ns) }

// touch gives key a word, as a take that may take does (and a peek of 0):
// empty, or used up to the watermark if the clock is behind it.
func (m *quotaModel) touch(key string, ns int64) {
	if _, ok := m.keys[key]; ok {
		return
	}
	k := &quotaKey{}
	if m.watermark > ns {
		k.used, k.endQ = m.capacity, ceilQuarter(m.watermark)
	}
	m.keys[key] = k
}

// state is key's word at ns, as a take at ns reads it: a period that ended,
// or holds nothing, begins anew at the end cal gives ns.
func (m *quotaModel) state(key string, ns int64, cal *engine.Calendar) (used uint64, endQ int64) {
	k, ok := m.keys[key]
	if !ok {
		k = &quotaKey{}
		if m.watermark > ns {
			k.used, k.endQ = m.capacity, ceilQuarter(m.watermark)
		}
	}
	if k.used == 0 || k.endQ <= floorQuarter(ns) {
		c := m.own
		if cal != nil {
			c = *cal
		}
		_, end := c.Bounds(time.Unix(0, ns))
		return 0, ceilQuarter(end.UnixNano())
	}
	return k.used, k.endQ
}

// decide is the Decision of a take of cost quanta (never: one that can
// never pass) at ns, and whether it takes.
func (m *quotaModel) decide(key string, ns int64, cost uint64, never bool, cal *engine.Calendar) (engine.Decision, bool) {
	used, endQ := m.state(key, ns, cal)
	wait := time.Duration(endQ*quarter - ns)
	d := engine.Decision{Remaining: float64(m.capacity-used) / 1000}
	if used > 0 {
		d.ResetAfter = wait
	}
	switch {
	case never || cost > m.capacity:
		d.RetryAfter = engine.InfDuration
		return d, false
	case used+cost > m.capacity:
		d.RetryAfter = wait
		return d, false
	}
	d.Allowed = true
	d.Remaining = float64(m.capacity-used-cost) / 1000
	if used+cost > 0 {
		d.ResetAfter = wait
	} else {
		d.ResetAfter = 0
	}
	return d, cost > 0
}

func (m *quotaModel) take(key string, ns int64, cost uint64, cal *engine.Calendar) {
	used, endQ := m.state(key, ns, cal)
	m.keys[key] = &quotaKey{used: used + cost, endQ: endQ}
}

// sweep removes the keys whose period ended, or that hold nothing, at ns.
func (m *quotaModel) sweep(ns int64) int {
	n := 0
	for key, k := range m.keys {
		if k.used > 0 && k.endQ > floorQuarter(ns) {
			continue
		}
		if k.used > 0 {
			m.watermark = max(m.watermark, k.endQ*quarter)
		}
		delete(m.keys, key)
		n++
	}
	return n
}

// FuzzQuota holds engine.Quota to quotaModel, exactly, over scripts of
// takes, all-or-none pairs and sweeps, with a clock that jumps across
// period boundaries and daylight-saving changes and steps back, and takes
// whose calendar (anchor, zone) changes from one to the next:
//
//	Q1 every Decision is the model's, field by field
//	Q2 a key never takes more than its quota in one period (as stored):
//	   the model takes only what fits
//	Q3 a TakeAllAt of two keys takes from both or neither
//	Q4 a sweep removes exactly the keys whose period ended, and a key new
//	   to the shard while the clock is behind a removed period's end finds
//	   that period used up
func FuzzQuota(f *testing.F) {
	f.Add(uint8(0), []byte{0, 1, 2, 0, 0, 1, 2, 0, 0, 1, 2, 0, 0, 4, 2, 0, 0, 9, 2, 0})
	f.Add(uint8(1), []byte{0, 0, 3, 1, 1, 5, 3, 2, 2, 6, 4, 3, 3, 8, 2, 4, 0, 10, 2, 0, 0, 11, 1, 1})
	f.Add(uint8(2), []byte{4, 3, 2, 0, 0, 7, 2, 0, 0, 0, 4, 0, 6, 12, 0, 0, 0, 13, 2, 0, 0, 0, 2, 0})
	f.Add(uint8(3), []byte{0, 0, 4, 0, 6, 6, 0, 0, 0, 9, 2, 0, 6, 14, 0, 0, 1, 10, 2, 0, 1, 0, 3, 0})
	f.Fuzz(func(t *testing.T, sel uint8, script []byte) {
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		london, err := time.LoadLocation("Europe/London")
		if err != nil {
			t.Fatal(err)
		}
		quotas := [...]float64{1, 5, 1000.5, 1e9}
		quota := quotas[sel%4]
		own := engine.Calendar{Period: engine.Monthly, Day: 31, Location: ny}
		if sel&4 != 0 {
			own = engine.Calendar{Period: engine.Daily, Hour: 2, Location: ny}
		}
		q, err := engine.NewQuota(engine.QuotaConfig{Quota: quota, Calendar: own, Shards: 1, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		m := &quotaModel{capacity: uint64(math.Round(quota * 1000)), own: own, keys: map[string]*quotaKey{}, watermark: math.MinInt64}
		cals := [...]*engine.Calendar{nil, {Period: engine.Monthly, Day: 15, Hour: 9, Location: ny},
			{Period: engine.Weekly, Weekday: 7, Hour: 1, Location: london}, {Period: engine.Daily, Hour: 2, Location: ny}}
		steps := [...]time.Duration{0, time.Second, 59 * time.Second, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour,
			31 * 24 * time.Hour, -time.Second, -time.Hour, -24 * time.Hour, 400 * 24 * time.Hour, -40 * 24 * time.Hour,
			90 * time.Minute, -90 * time.Minute, 13*time.Hour + 17*time.Second, -17 * time.Second}
		capQ := m.capacity
		costs := [...]uint64{0, 1, 1000, capQ / 2, capQ, capQ + 1, math.MaxUint64, 3}
		keys := [...]string{"a", "b", "c"}
		// 2026-03-07 20:00 UTC: a day before New York's clocks spring
		// forward, and days before London's.
		ns := time.Date(2026, 3, 7, 20, 0, 0, 0, time.UTC).UnixNano()
		for i := 0; i+4 <= len(script) && i < 4*64; i += 4 {
			op, step, costSel, calSel := script[i], script[i+1], script[i+2], script[i+3]
			ns += int64(steps[step%16])
			at := time.Unix(0, ns)
			key := keys[int(op>>4)%3]
			cal := cals[calSel%4]
			cost := costs[costSel%8]
			n := float64(cost) / 1000
			never := cost == math.MaxUint64
			if never {
				n = -1
			}
			switch op % 8 {
			case 0, 1, 2, 3:
				want, takes := m.decide(key, ns, cost, never, cal)
				if !never && cost <= m.capacity {
					m.touch(key, ns)
				}
				got := q.TakeAt(at, key, n, cal)
				if got != want {
					t.Fatalf("op %d: TakeAt(%v, %q, %v, cal %d) = %+v, want %+v", i/4, at.UTC(), key, n, calSel%4, got, want)
				}
				if takes {
					m.take(key, ns, cost, cal)
				}
			case 4, 5:
				other := keys[(int(op>>4)+1)%3]
				wa, ta := m.decide(key, ns, cost, never, cal)
				wb, tb := m.decide(other, ns, 1000, false, nil)
				takes := []engine.Take{{Limiter: q, Key: key, N: n, Calendar: cal}, {Limiter: q, Key: other, N: 1}}
				out := make([]engine.Decision, 2)
				denied, err := q.TakeAllAt(at, takes, out)
				if err != nil {
					t.Fatal(err)
				}
				// Both are held in turn, unless one can never pass.
				if !never && cost <= m.capacity {
					m.touch(key, ns)
					if wa.Allowed {
						m.touch(other, ns)
					}
				}
				wantDenied := -1
				switch {
				case !wa.Allowed:
					wantDenied = 0
				case !wb.Allowed:
					wantDenied = 1
				}
				if denied != wantDenied {
					t.Fatalf("op %d: TakeAllAt denied %d, want %d (%+v %+v)", i/4, denied, wantDenied, wa, wb)
				}
				if denied < 0 {
					if out[0] != wa || out[1] != wb {
						t.Fatalf("op %d: TakeAllAt = %+v, want %+v %+v", i/4, out, wa, wb)
					}
					if ta {
						m.take(key, ns, cost, cal)
					}
					if tb {
						m.take(other, ns, 1000, nil)
					}
					continue
				}
				// Denied: nothing taken, and each decision reads the state
				// after, which is the state before.
				ra := float64(m.capacity-stateUsed(m, key, ns, cal)) / 1000
				rb := float64(m.capacity-stateUsed(m, other, ns, nil)) / 1000
				if out[0].Allowed || out[1].Allowed || out[0].Remaining != ra || out[1].Remaining != rb {
					t.Fatalf("op %d: denied TakeAllAt = %+v, want nothing taken: %v and %v left", i/4, out, ra, rb)
				}
				if out[denied].RetryAfter <= 0 {
					t.Fatalf("op %d: the denied take has RetryAfter %v", i/4, out[denied].RetryAfter)
				}
			case 6:
				if got, want := q.SweepAt(at), m.sweep(ns); got != want {
					t.Fatalf("op %d: SweepAt(%v) removed %d, want %d", i/4, at.UTC(), got, want)
				}
				if q.Len() != len(m.keys) {
					t.Fatalf("op %d: %d keys after a sweep, want %d", i/4, q.Len(), len(m.keys))
				}
			default:
				// A peek.
				want, _ := m.decide(key, ns, 0, false, cal)
				m.touch(key, ns)
				if got := q.TakeAt(at, key, 0, cal); got != want {
					t.Fatalf("op %d: peek = %+v, want %+v", i/4, got, want)
				}
			}
		}
	})
}

func stateUsed(m *quotaModel, key string, ns int64, cal *engine.Calendar) uint64 {
	u, _ := m.state(key, ns, cal)
	return u
}
