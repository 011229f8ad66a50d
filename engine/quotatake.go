package engine

import (
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// takeWithQuotas is takeAll of checked takes of which some name Quotas: the
// Quotas' takes are held first, in order, then the Engines' are made as
// takeEngines makes them; the first denial gives back every take held.
// A take that can never pass (a cost above its limiter's burst or quota,
// negative or NaN) denies before anything is taken.
//
// A Quota's take given back returns its cost to the key's period, unless
// that period ended in between (the next began with the whole quota): no
// period ever admits more than if the take had never been made.
func takeWithQuotas(t time.Time, explicit bool, takes []Take, out []Decision) int {
	nanos := func(q *Quota) int64 {
		if explicit {
			return t.UnixNano()
		}
		return q.now().UnixNano()
	}
	for i := range takes {
		cost, ok := fixedpoint.Quantize(takes[i].N)
		switch l := takes[i].Limiter.(type) {
		case *Quota:
			ok = ok && cost <= l.set.Load().capacity
		case *Engine:
			ok = ok && cost <= l.current().layout.Capacity()
		}
		if !ok {
			quotaDenied(t, explicit, takes, out, nil, i, false)
			return i
		}
	}
	var heldBuf [heldOnStack]quotaHeldAt
	holds := heldBuf[:0]
	for i := range takes {
		q, ok := takes[i].Limiter.(*Quota)
		if !ok {
			continue
		}
		cost, _ := fixedpoint.Quantize(takes[i].N)
		key := BoundedKey(takes[i].Key)
		d, h := q.hold(nanos(q), key, cost, takes[i].Calendar)
		out[i] = d
		if !d.Allowed {
			q.denied.add()
			quotaDenied(t, explicit, takes, out, holds, i, true)
			return i
		}
		holds = append(holds, quotaHeldAt{i: i, held: h})
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
				q := takes[h.i].Limiter.(*Quota)
				q.denied.add()
				out[h.i] = q.give(h.held, nanos(q), BoundedKey(takes[h.i].Key), takes[h.i].Calendar)
			}
			return idx[denied]
		}
	}
	for _, h := range holds {
		takes[h.i].Limiter.(*Quota).allowed.add()
	}
	return -1
}

// quotaHeldAt is a Quota's take held by takeWithQuotas: its index, and
// what giving it back needs (nothing for a peek).
type quotaHeldAt struct {
	i    int
	held quotaHeld
}

// quotaDenied completes a denial at index k for takeWithQuotas: it gives
// back holds, fills out for every take but k when kDone (k filled and
// counted it), and counts every other take as denied. Nothing of an Engine
// was taken yet.
func quotaDenied(t time.Time, explicit bool, takes []Take, out []Decision, holds []quotaHeldAt, k int, kDone bool) {
	for j := len(holds) - 1; j >= 0; j-- {
		h := holds[j]
		q := takes[h.i].Limiter.(*Quota)
		q.denied.add()
		ns := t.UnixNano()
		if !explicit {
			ns = q.now().UnixNano()
		}
		key := BoundedKey(takes[h.i].Key)
		if h.held.b != nil {
			out[h.i] = q.give(h.held, ns, key, takes[h.i].Calendar)
		} else {
			cost, _ := fixedpoint.Quantize(takes[h.i].N)
			out[h.i] = q.peek(ns, key, cost, takes[h.i].Calendar)
		}
	}
	for i := range takes {
		if kDone && i == k || heldAt(holds, i) {
			continue
		}
		cost, ok := fixedpoint.Quantize(takes[i].N)
		key := BoundedKey(takes[i].Key)
		switch l := takes[i].Limiter.(type) {
		case *Quota:
			l.denied.add()
			if !ok || cost > l.set.Load().capacity {
				cost = fixedpoint.Never
			}
			ns := t.UnixNano()
			if !explicit {
				ns = l.now().UnixNano()
			}
			out[i] = l.peek(ns, key, cost, takes[i].Calendar)
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
func heldAt(holds []quotaHeldAt, i int) bool {
	for _, h := range holds {
		if h.i == i {
			return true
		}
	}
	return false
}
