package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// QuotaConfig describes a Quota. Quota and Calendar are required; the zero
// value of every other field picks the default of the Config field of the
// same name.
type QuotaConfig struct {
	// Quota is what each key may take in one period, in tokens: from
	// 0.001 to 1e9, a multiple of 0.001.
	Quota float64
	// Calendar says when periods begin. A take may bring a calendar of
	// its own (Take.Calendar), for a key whose period begins elsewhere.
	Calendar Calendar
	// Shards, SweepInterval, MaxKeys and OnFull are as in Config. The
	// sweeper evicts the keys whose period has ended (a key with nothing
	// taken in its period holds nothing worth keeping), and so does a new
	// key that finds MaxKeys live.
	Shards        int
	SweepInterval time.Duration
	MaxKeys       int
	OnFull        FullPolicy
	// Now is the wall clock the periods are read on; nil is time.Now.
	// TakeAllAt and SweepAt take the time from the caller instead.
	Now func() time.Time
}

// Quota is a calendar quota: each key may take Quota tokens in each period
// of a Calendar (a day, a week, a month or a year that begins at a calendar
// boundary in a time zone), and gets them all back when the next begins. It
// is a Limiter, and an Engine decides it together with token buckets
// (TakeAll), all or none.
//
// A key's state is one word: what it took in its period, and when the
// period ends (to the quarter hour). A period ends only when the clock passes the
// end it stored: a clock that steps back, however far, stays in the period
// it was in, and a key never gets a period's quota twice. A take whose
// calendar changed (another anchor, another zone) stays in its period until
// that period's end too, and starts its next period by the new calendar:
// moving an anchor never resets what was taken. Words hold the end modulo
// 2^24 quarter hours (479 years) and read it as the one nearest the
// clock: a clock that jumps by up to 239 years, in either direction, reads
// every word right.
//
// Takes are lock-free: a CompareAndSwap loop on the key's word, with the
// table of an Engine (package shard). A take of an existing key within its
// period allocates nothing and reads no calendar; one that starts a period
// computes its end (Calendar.Bounds, cached for the quota's own calendar).
type Quota struct {
	// set is the quota and calendar in force, replaced whole by SetQuota.
	set   atomic.Pointer[quotaSet]
	table *shard.Table
	now   func() time.Time

	live     atomic.Int64
	maxKeys  int64
	onFull   FullPolicy
	overflow atomic.Uint64
	evicted  atomic.Uint64
	// spill is the overflow word of FullShare: one quota for every key
	// that found the table full.
	spill *shard.Bucket
	// noEvictBefore is the soonest end of a period the last eviction
	// scan saw (Unix nanoseconds): no key can go before it.
	noEvictBefore atomic.Int64

	allowed, denied counter

	sweepEvery time.Duration
	stop, done chan struct{}
	closeOnce  sync.Once
}

// quotaSet is a Quota's quota and calendar.
type quotaSet struct {
	cal      Calendar
	quota    float64
	capacity uint64 // quanta
	// period caches the bounds of cal around the last time a period
	// began: most periods begin from it.
	period atomic.Pointer[quotaPeriod]
}

// quotaPeriod is a period of a Quota's own calendar, in Unix nanoseconds,
// and its end in quarter hours.
type quotaPeriod struct {
	start, end int64
	endQ       int64
}

var (
	_ Limiter      = (*Quota)(nil)
	_ TakerAt      = (*Quota)(nil)
	_ QuotaRetuner = (*Quota)(nil)
)

// The word of a key: the end of its period, in quarter hours since the Unix
// epoch modulo 2^24 (479 years), over what it took, in quanta (at most
// 1e12, below 2^40 - 1, so a word is never fixedpoint.Tomb). Every zone's
// offset has been a whole number of quarter hours since 1972, so a period
// ends on a quarter hour; an end between two (an older offset) is rounded
// up, and the period lasts that much longer.
const (
	quotaUsedBits   = 40
	quotaUsedMask   = 1<<quotaUsedBits - 1
	quotaEndBits    = 64 - quotaUsedBits
	quotaEndMask    = 1<<quotaEndBits - 1
	nanosPerQuarter = int64(15 * time.Minute)
	maxQuota        = 1e9
)

func packQuota(endQ int64, used uint64) fixedpoint.Word {
	return fixedpoint.Word(uint64(endQ)&quotaEndMask<<quotaUsedBits | used)
}

// unpackQuota reads w at nowQ: what was taken, and the end of the period
// in quarter hours, read as the one nearest nowQ of the ends w may stand
// for (within 239 years of it).
func unpackQuota(w fixedpoint.Word, nowQ int64) (used uint64, endQ int64) {
	d := (int64(uint64(w)>>quotaUsedBits) - nowQ) & quotaEndMask
	if d >= 1<<(quotaEndBits-1) {
		d -= 1 << quotaEndBits
	}
	return uint64(w) & quotaUsedMask, nowQ + d
}

// floorQuarter is ns in whole quarter hours, rounded down; ceilQuarter
// rounded up.
func floorQuarter(ns int64) int64 {
	m := ns / nanosPerQuarter
	if ns%nanosPerQuarter < 0 {
		m--
	}
	return m
}

func ceilQuarter(ns int64) int64 { return -floorQuarter(-ns) }

// NewQuota returns a Quota configured as cfg, with its sweeper running
// unless cfg.SweepInterval is negative. Every problem is reported, each as a
// *LimitError naming the field, wrapping ErrInvalidConfig.
func NewQuota(cfg QuotaConfig) (*Quota, error) {
	errs := []error{CheckQuota(cfg.Quota, cfg.Calendar)}
	capacity, _ := fixedpoint.QuantizeExact(cfg.Quota)
	// The fields shared with Config are checked as New checks them.
	shared := Config{Shards: cfg.Shards, SweepInterval: cfg.SweepInterval, MaxKeys: cfg.MaxKeys, OnFull: cfg.OnFull}
	shards, err := shared.shards(runtime.GOMAXPROCS(0))
	errs = append(errs, err)
	sweep, err := shared.sweepInterval()
	errs = append(errs, err)
	maxKeys, err := shared.maxKeys()
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
	q := &Quota{table: shard.NewTable(shards, binary.LittleEndian.Uint64(seed[:])),
		now: cfg.Now, maxKeys: maxKeys, onFull: cfg.OnFull, sweepEvery: sweep,
		allowed: newCounter(), denied: newCounter(), stop: make(chan struct{}), done: make(chan struct{})}
	q.set.Store(&quotaSet{cal: cfg.Calendar, quota: cfg.Quota, capacity: capacity})
	if q.now == nil {
		q.now = time.Now
	}
	if q.onFull == FullShare && q.maxKeys > 0 {
		q.spill = shard.NewBucket(0, 0, 0)
	}
	if sweep > 0 {
		go q.sweeper()
	} else {
		close(q.done)
	}
	return q, nil
}

// Take takes n tokens from key's quota now (QuotaConfig.Now) in the
// quota's own calendar, if its period has them left. The error is nil
// unless q is nil.
func (q *Quota) Take(_ context.Context, key string, n float64) (Decision, error) {
	if q == nil {
		return Decision{}, ErrNilLimiter
	}
	return q.TakeAt(q.now(), key, n, nil), nil
}

// TakeAt takes n tokens from key's quota at t, in the period that cal (nil:
// the quota's own calendar) gives t, or in the period the key is still in.
// A cost above the quota is denied with RetryAfter InfDuration; 0 peeks. A
// denial takes nothing, and its RetryAfter is the end of the key's period.
func (q *Quota) TakeAt(t time.Time, key string, n float64, cal *Calendar) Decision {
	cost, ok := fixedpoint.Quantize(n)
	if !ok || cost > q.set.Load().capacity {
		q.denied.add()
		return q.peek(t.UnixNano(), BoundedKey(key), fixedpoint.Never, cal)
	}
	d, _ := q.hold(t.UnixNano(), BoundedKey(key), cost, cal)
	if d.Allowed {
		q.allowed.add()
	} else {
		q.denied.add()
	}
	return d
}

// TakeAll is TakeAllAt at the wall clock: each Quota's Now, each Engine's
// monotonic clock.
func (q *Quota) TakeAll(_ context.Context, takes []Take, out []Decision) (int, error) {
	return takeAll(time.Time{}, false, takes, out)
}

// TakeAllAt takes every take at t, or none, as Engine.TakeAllAt: takes may
// name Engines and Quotas. The Quotas' takes are made first, in order, then
// the Engines'.
func (q *Quota) TakeAllAt(t time.Time, takes []Take, out []Decision) (int, error) {
	return takeAll(t, true, takes, out)
}

// Limit is the quota's average rate: Quota over the period's nominal
// length (Period.Nominal). It is what a caller that needs one rate reads;
// the quota itself renews all at once.
func (q *Quota) Limit() Limit {
	set := q.set.Load()
	return Limit(set.quota / set.cal.Period.Nominal().Seconds())
}

// Burst is the quota: the most one key can take in one period.
func (q *Quota) Burst() float64 { return q.set.Load().quota }

// Calendar returns the quota's own calendar.
func (q *Quota) Calendar() Calendar { return q.set.Load().cal }

// SetQuota gives the quota n tokens per period of cal from now on. What
// each key took stays: a key keeps its period until that period ends, and
// the next begins by cal (as a changed anchor does, Take.Calendar); a key
// that took more than a lowered quota is denied until its period ends. It
// fails, changing nothing, for a quota or calendar NewQuota refuses.
func (q *Quota) SetQuota(n float64, cal Calendar) error {
	if err := CheckQuota(n, cal); err != nil {
		return err
	}
	capacity, _ := fixedpoint.QuantizeExact(n)
	q.set.Store(&quotaSet{cal: cal, quota: n, capacity: capacity})
	return nil
}

// Len returns the number of keys the quota holds.
func (q *Quota) Len() int { return int(q.live.Load()) }

// Stats returns the quota's counters, as Engine.Stats.
func (q *Quota) Stats() Stats {
	return Stats{Allowed: q.allowed.load(), Denied: q.denied.load(), Evicted: q.evicted.Load(), Live: q.Len(),
		Overflow: q.overflow.Load()}
}

// Close stops the sweeper. Takes after Close still work.
func (q *Quota) Close() error {
	q.closeOnce.Do(func() { close(q.stop) })
	<-q.done
	return nil
}

// quotaHeld is a take a TakeAll may give back: where, in which period, and
// how much.
type quotaHeld struct {
	b    *shard.Bucket
	endQ int64
	cost uint64
	// renewed reports that the take began the period, over orig, the
	// word of the period before: giving back all there is restores orig,
	// so that a clock stepping back into that period finds what it held.
	renewed bool
	orig    fixedpoint.Word
}

// endFor is the end, in quarter hours, of the period that cal (nil: set's own)
// gives the instant ns.
func (set *quotaSet) endFor(ns int64, cal *Calendar) int64 {
	if cal == nil {
		if p := set.period.Load(); p != nil && p.start <= ns && ns < p.end {
			return p.endQ
		}
		start, end := set.cal.Bounds(time.Unix(0, ns))
		p := &quotaPeriod{start: start.UnixNano(), end: end.UnixNano(), endQ: ceilQuarter(end.UnixNano())}
		set.period.Store(p)
		return p.endQ
	}
	_, end := cal.Bounds(time.Unix(0, ns))
	return ceilQuarter(end.UnixNano())
}

// hold takes cost quanta (at most the quota) from key's word at ns, counting
// nothing, and returns what giving them back needs. key is bounded.
//
// Lock-free: the new word is computed from the word loaded, inside
// shard.Bucket.Update, which retries on a lost race; a word found tombed
// (evicted, or moved by a rebuild) sends it back to the table for the key's
// live word.
func (q *Quota) hold(ns int64, key string, cost uint64, cal *Calendar) (Decision, quotaHeld) {
	nowQ := floorQuarter(ns)
	h := shard.Hash(key)
	set := q.set.Load()
	capacity := set.capacity
	renewEnd := int64(math.MinInt64) // computed once, when a period begins
	b := q.table.Lookup(h, key)
	overflowed := false
	for {
		if b == nil {
			var d Decision
			if b, d = q.create(h, key, ns, &overflowed); b == nil {
				return d, quotaHeld{}
			}
		}
		var (
			used     uint64
			end      int64
			allowed  bool
			renewed  bool
			original fixedpoint.Word
		)
		_, live := b.Update(func(w fixedpoint.Word) (fixedpoint.Word, bool) {
			u, e := unpackQuota(w, nowQ)
			original, renewed = w, false
			if u == 0 || e <= nowQ {
				if renewEnd == math.MinInt64 {
					renewEnd = set.endFor(ns, cal)
				}
				u, e, renewed = 0, renewEnd, true
			}
			used, end = u, e
			allowed = u+cost <= capacity
			if !allowed || cost == 0 {
				return w, false
			}
			return packQuota(e, u+cost), true
		})
		if !live {
			// Evicted or moved: the key's live word, if it has one.
			b = q.table.Current(h, key)
			continue
		}
		wait := time.Duration(end*nanosPerQuarter - ns)
		if !allowed {
			return Decision{Remaining: fixedpoint.TokensOf(capacity - min(used, capacity)), RetryAfter: wait, ResetAfter: wait}, quotaHeld{}
		}
		d := Decision{Allowed: true, Remaining: fixedpoint.TokensOf(capacity - used - cost)}
		if used+cost > 0 {
			d.ResetAfter = wait
		}
		if cost == 0 {
			return d, quotaHeld{}
		}
		return d, quotaHeld{b: b, endQ: end, cost: cost, renewed: renewed, orig: original}
	}
}

// peek is the Decision a take of cost (fixedpoint.Never: one that can never
// pass) would get at ns, taking nothing.
func (q *Quota) peek(ns int64, key string, cost uint64, cal *Calendar) Decision {
	nowQ := floorQuarter(ns)
	used, end := uint64(0), int64(0)
	fresh := true
	h := shard.Hash(key)
	set := q.set.Load()
	capacity := set.capacity
	w, live := fixedpoint.Word(0), false
	if b := q.table.Lookup(h, key); b != nil {
		w, live = b.Word()
	}
	if !live {
		// What a word created now would hold.
		_, _, w = quotaFresh{capacity}.Fresh(ns, q.table.Watermark(h))
	}
	if u, e := unpackQuota(w, nowQ); u > 0 && e > nowQ {
		used, end, fresh = u, e, false
	}
	if fresh {
		end = set.endFor(ns, cal)
	}
	wait := time.Duration(end*nanosPerQuarter - ns)
	d := Decision{Remaining: fixedpoint.TokensOf(capacity - min(used, capacity))}
	if used > 0 {
		d.ResetAfter = wait
	}
	switch {
	case cost == fixedpoint.Never || cost > capacity:
		d.RetryAfter = InfDuration
	case used+cost > capacity:
		d.RetryAfter = wait
	}
	return d
}

// give returns a held take to its word, if the word is still in the period
// the take was made in, and reports the key's state as a denied Decision
// at ns. A period that ended since owes nothing back: the next one began
// with the whole quota. A take that began its period, given back with
// nothing else taken in it, leaves the word it found.
func (q *Quota) give(h quotaHeld, ns int64, key string, cal *Calendar) Decision {
	nowQ := floorQuarter(ns)
	b := h.b
	for b != nil {
		_, live := b.Update(func(w fixedpoint.Word) (fixedpoint.Word, bool) {
			u, e := unpackQuota(w, nowQ)
			if e != h.endQ || u < h.cost {
				return w, false
			}
			if u == h.cost && h.renewed {
				return h.orig, true
			}
			return packQuota(e, u-h.cost), true
		})
		if live || b == q.spill {
			break
		}
		// Moved by a rebuild of its shard (an evicted word's period
		// ended, and owes nothing): give to where it went.
		b = q.table.Current(shard.Hash(key), key)
	}
	return q.peek(ns, key, h.cost, cal)
}

// create inserts a word for key, or, with MaxKeys live and none whose
// period ended, returns the overflow word (FullShare) or no word and the
// capacity denial (FullDeny), counted.
func (q *Quota) create(h uint64, key string, ns int64, overflowed *bool) (*shard.Bucket, Decision) {
	if !q.reserve(ns) {
		if !*overflowed {
			*overflowed = true
			q.overflow.Add(1)
		}
		if q.spill != nil {
			return q.spill, Decision{}
		}
		return nil, Decision{RetryAfter: time.Duration(max(q.noEvictBefore.Load()-ns, 1))}
	}
	b, created := q.table.Insert(h, key, quotaFresh{q.set.Load().capacity}, ns)
	if !created {
		q.live.Add(-1)
	}
	return b, Decision{}
}

// reserve counts one more live key, evicting one whose period ended first
// if MaxKeys are live. It reports false if there is no room.
func (q *Quota) reserve(ns int64) bool {
	if q.maxKeys == 0 {
		q.live.Add(1)
		return true
	}
	for try := 0; ; {
		n := q.live.Load()
		if n < q.maxKeys {
			if q.live.CompareAndSwap(n, n+1) {
				return true
			}
			continue
		}
		if try++; try > maxReserveTries || !q.evictForRoom(ns) {
			return false
		}
	}
}

func (q *Quota) evictForRoom(ns int64) bool {
	if ns < q.noEvictBefore.Load() {
		return false
	}
	soonest := int64(math.MaxInt64)
	found := q.table.EvictOne(evictBudget, func(b *shard.Bucket) (bool, int64) {
		evicted, at, endNs := q.evictIfEnded(b, ns)
		soonest = min(soonest, endNs)
		return evicted, at
	})
	if found {
		q.evicted.Add(1)
		q.live.Add(-1)
		return true
	}
	if soonest != math.MaxInt64 {
		q.noEvictBefore.Store(soonest)
	}
	return false
}

// evictIfEnded tombs b if its period ended by ns, or it holds nothing. It
// returns whether it did, the watermark the eviction leaves (the end of the
// period it removed, in Unix nanoseconds), and otherwise when b's period
// ends.
//
// Lock-free: shard.Bucket.TombIf, one CompareAndSwap from the word judged;
// a take that lands first is judged again.
func (q *Quota) evictIfEnded(b *shard.Bucket, ns int64) (evicted bool, at, endNs int64) {
	nowQ := floorQuarter(ns)
	endNs = math.MaxInt64
	evicted = b.TombIf(func(w fixedpoint.Word) bool {
		u, e := unpackQuota(w, nowQ)
		if u > 0 && e > nowQ {
			endNs = e * nanosPerQuarter
			return false
		}
		// A word that held nothing leaves no watermark.
		at = math.MinInt64
		if u > 0 {
			at = e * nanosPerQuarter
		}
		return true
	})
	return evicted, at, endNs
}

// quotaFresh is the shard.Generations of a Quota: one generation; a new
// key holds nothing, unless the clock is behind the end of a period a sweep
// removed from its shard (the shard's watermark): then it may be that
// key's period, and the key starts it with the quota used up, so that no
// clock stepping back hands out a period twice.
type quotaFresh struct{ capacity uint64 }

func (quotaFresh) Current() uint16 { return 0 }

func (f quotaFresh) Fresh(born, watermark int64) (uint16, fixedpoint.Epoch, fixedpoint.Word) {
	if watermark > born {
		return 0, 0, packQuota(ceilQuarter(watermark), f.capacity)
	}
	return 0, 0, 0
}

// SweepAt removes every key whose period ended by t, and returns how many.
func (q *Quota) SweepAt(t time.Time) int {
	ns := t.UnixNano()
	n := 0
	for i := range q.table.Shards() {
		n += q.sweepShard(i, ns)
	}
	return n
}

func (q *Quota) sweepShard(i int, ns int64) int {
	n := q.table.Sweep(i, func(b *shard.Bucket) (bool, int64) {
		evicted, at, _ := q.evictIfEnded(b, ns)
		return evicted, at
	})
	if n > 0 {
		q.evicted.Add(uint64(n))
		q.live.Add(-int64(n))
	}
	return n
}

func (q *Quota) sweeper() {
	defer close(q.done)
	tk := time.NewTicker(q.sweepEvery)
	defer tk.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-tk.C:
		}
		for i := range q.table.Shards() {
			select {
			case <-q.stop:
				return
			default:
			}
			q.sweepShard(i, q.now().UnixNano())
		}
	}
}
