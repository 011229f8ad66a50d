package engine

import (
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// takeWithLocals is takeAll of checked takes of which some name Quotas or
// Windows (local): their takes are held first, in order, then the Engines'
// are made as takeEngines makes them; the first denial gives back every
// take held.
// A take that can never pass (a cost above its limiter's burst or quota,
// negative or NaN) denies before anything is taken.
//
// A Quota's take given back returns its cost to the key's period, unless
// that period ended in between (the next began with the whole quota): no
// period ever admits more than if the take had never been made.
func takeWithLocals(t time.Time, explicit bool, takes []Take, out []Decision) int {
	for i := range takes {
		cost, ok := fixedpoint.Quantize(takes[i].N)
		switch l := takes[i].Limiter.(type) {
		case local:
			ok = ok && cost <= l.capacityQuanta()
		case *Engine:
			ok = ok && cost <= l.current().layout.Capacity()
		}
		if !ok {
			localsDenied(t, explicit, takes, out, nil, i, false)
			return i
		}
	}
	var heldBuf [heldOnStack]localHeldAt
	holds := heldBuf[:0]
	for i := range takes {
		l, ok := takes[i].Limiter.(local)
		if !ok {
			continue
		}
		cost, _ := fixedpoint.Quantize(takes[i].N)
		d, h := l.holdTake(localNanos(l, t, explicit), takes[i].Key, takes[i].Calendar, cost)
		out[i] = d
		if !d.Allowed {
			l.countDenied()
			localsDenied(t, explicit, takes, out, holds, i, true)
			return i
		}
		holds = append(holds, localHeldAt{i: i, held: h})
	}
	// The Engines' takes, apart: takeEngines reads only Engines.
	var engBuf [heldOnStack]Take
	var outBuf [heldOnStack]Decision
	var idxBuf [heldOnStack]int
	eng, eout, idx := engBuf[:0], outBuf[:0], idxBuf[:0]
	for i := range takes {
		if _, ok := takes[i].Limiter.(*Engine); ok {
			eng, idx = append(eng, takes[i]), append(idx, i)
		}
	}
	if len(eng) > 0 {
		if len(eng) > heldOnStack {
			eout = make([]Decision, len(eng))
		} else {
			eout = outBuf[:len(eng)]
		}
		denied := takeEngines(t, explicit, eng, eout)
		for j, i := range idx {
			out[i] = eout[j]
		}
		if denied >= 0 {
			for _, h := range holds {
				l := takes[h.i].Limiter.(local)
				l.countDenied()
				out[h.i] = l.giveTake(h.held, localNanos(l, t, explicit), takes[h.i].Key, takes[h.i].Calendar)
			}
			return idx[denied]
		}
	}
	for _, h := range holds {
		takes[h.i].Limiter.(local).countAllowed()
	}
	return -1
}

// local is a limiter besides the Engine that decides in memory, and that
// takeWithLocals takes from all or none: Quota and Window.
type local interface {
	Limiter
	// capacityQuanta is the largest cost that can ever pass.
	capacityQuanta() uint64
	// holdTake takes cost quanta for tk at ns, counting nothing, and
	// returns what giving them back needs; peekTake decides without
	// taking; giveTake gives a held take back and reports the state.
	holdTake(ns int64, key string, cal *Calendar, cost uint64) (Decision, localHeld)
	peekTake(ns int64, key string, cal *Calendar, cost uint64) Decision
	giveTake(h localHeld, ns int64, key string, cal *Calendar) Decision
	countAllowed()
	countDenied()
	nowNanos() int64
}

// localHeld is what giving a local limiter's take back needs.
type localHeld struct {
	quota  quotaHeld
	window windowHeld
}

// held reports whether something was taken.
func (h localHeld) held() bool { return h.quota.b != nil || h.window.k != nil }

func localNanos(l local, t time.Time, explicit bool) int64 {
	if explicit {
		return t.UnixNano()
	}
	return l.nowNanos()
}

func (q *Quota) capacityQuanta() uint64 { return q.set.Load().capacity }
func (q *Quota) holdTake(ns int64, key string, cal *Calendar, cost uint64) (Decision, localHeld) {
	d, h := q.hold(ns, BoundedKey(key), cost, cal)
	return d, localHeld{quota: h}
}
func (q *Quota) peekTake(ns int64, key string, cal *Calendar, cost uint64) Decision {
	return q.peek(ns, BoundedKey(key), cost, cal)
}
func (q *Quota) giveTake(h localHeld, ns int64, key string, cal *Calendar) Decision {
	return q.give(h.quota, ns, BoundedKey(key), cal)
}
func (q *Quota) countAllowed()   { q.allowed.add() }
func (q *Quota) countDenied()    { q.denied.add() }
func (q *Quota) nowNanos() int64 { return q.now().UnixNano() }

func (w *Window) capacityQuanta() uint64 { return w.lim.Load().capacity }
func (w *Window) holdTake(ns int64, key string, cal *Calendar, cost uint64) (Decision, localHeld) {
	d, h := w.hold(ns, BoundedKey(key), cost)
	return d, localHeld{window: h}
}
func (w *Window) peekTake(ns int64, key string, cal *Calendar, cost uint64) Decision {
	return w.peek(ns, BoundedKey(key), cost)
}
func (w *Window) giveTake(h localHeld, ns int64, key string, cal *Calendar) Decision {
	return w.give(h.window, ns, BoundedKey(key))
}
func (w *Window) countAllowed()   { w.allowed.add() }
func (w *Window) countDenied()    { w.denied.add() }
func (w *Window) nowNanos() int64 { return w.now().UnixNano() }

// localHeldAt is a Quota's take held by takeWithLocals: its index, and
// what giving it back needs (nothing for a peek).
type localHeldAt struct {
	i    int
	held localHeld
}

// localsDenied completes a denial at index k for takeWithLocals: it gives
// back holds, fills out for every take but k when kDone (k filled and
// counted it), and counts every other take as denied. Nothing of an Engine
// was taken yet.
func localsDenied(t time.Time, explicit bool, takes []Take, out []Decision, holds []localHeldAt, k int, kDone bool) {
	for j := len(holds) - 1; j >= 0; j-- {
		h := holds[j]
		l := takes[h.i].Limiter.(local)
		l.countDenied()
		ns := localNanos(l, t, explicit)
		if h.held.held() {
			out[h.i] = l.giveTake(h.held, ns, takes[h.i].Key, takes[h.i].Calendar)
		} else {
			cost, _ := fixedpoint.Quantize(takes[h.i].N)
			out[h.i] = l.peekTake(ns, takes[h.i].Key, takes[h.i].Calendar, cost)
		}
	}
	for i := range takes {
		if kDone && i == k || heldAt(holds, i) {
			continue
		}
		cost, ok := fixedpoint.Quantize(takes[i].N)
		key := BoundedKey(takes[i].Key)
		switch l := takes[i].Limiter.(type) {
		case local:
			l.countDenied()
			if !ok || cost > l.capacityQuanta() {
				cost = fixedpoint.Never
			}
			out[i] = l.peekTake(localNanos(l, t, explicit), takes[i].Key, takes[i].Calendar, cost)
		case *Engine:
			l.denied.add()
			if !ok || cost > l.current().layout.Capacity() {
				cost = fixedpoint.Never
			}
			out[i] = l.peek(l.nanosFor(t, explicit), key, cost)
		}
	}
}

// heldAt reports whether holds has take i.
func heldAt(holds []localHeldAt, i int) bool {
	for _, h := range holds {
		if h.i == i {
			return true
		}
	}
	return false
}
