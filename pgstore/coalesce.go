package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
)

// Single takes of one key of a Limiter coalesce: while a statement for the
// key is in flight, later takes of it queue, and when it returns they go
// together in the next one, at most maxBatch of them, in the order they
// arrived. Every take of a key waits for its row lock anyway (the takes of a
// hot key serialise on it), so a statement per caller only makes the queue
// longer inside the database, where each waits holding a connection; one
// statement in flight per key and Limiter costs the row one write per
// batch instead of one per take. A take that finds its key idle goes at
// once: a lone caller waits for nothing.
//
// Whoever sent a batch hands the next to its first waiter, which sends it
// and hands on in turn: no caller does more than one batch's work for
// others.
const maxBatch = 1000

// coalescer is a Limiter's queues of single takes, one per key with a
// statement in flight.
type coalescer struct {
	mu sync.Mutex
	// keys holds an entry per row key with a statement in flight: the
	// takes waiting for the next.
	keys map[string]*keyQueue
}

// keyQueue is the takes of one key waiting for its next statement.
type keyQueue struct {
	waiting []*pending
}

// pending is one single take. lead and the answer after it are written
// before wake is closed: lead by the sender of the batch before, the answer
// by the sender of the take's batch, or by its caller when it leaves the
// queue.
type pending struct {
	ctx  context.Context
	key  string // the caller's key
	rk   string // its row key
	n    float64
	cost uint64
	at   *int64 // the time to decide at (tests), nil for the database's
	// queued is true while the take is in its key's waiting list; guarded
	// by coalescer.mu.
	queued bool
	// wake is closed when the take is answered or handed a batch to send
	// (lead).
	wake   chan struct{}
	lead   []*pending
	d      engine.Decision
	denied int // TakeAll's: 0 if denied, else -1
	now    time.Time
	err    error
}

// takeOne is a single take of key from l's bucket, coalesced with the
// other single takes of the key unless Config.DisableCoalescing. It returns
// the Decision, TakeAll's denied index, the database's time of the decision
// and the error, as takeAll does for one take.
func (l *Limiter) takeOne(ctx context.Context, key string, n float64, at *int64) (engine.Decision, int, time.Time, error) {
	p := &pending{ctx: ctx, key: key, rk: l.KeyFor(key), n: n, cost: l.s.u.cost(n), at: at}
	if l.s.DisableCoalescing {
		l.send([]*pending{p})
		return p.d, p.denied, p.now, p.err
	}
	c := &l.co
	c.mu.Lock()
	q, busy := c.keys[p.rk]
	if !busy {
		if c.keys == nil {
			c.keys = make(map[string]*keyQueue)
		}
		c.keys[p.rk] = &keyQueue{}
		c.mu.Unlock()
		l.lead(p, []*pending{p})
		return p.d, p.denied, p.now, p.err
	}
	p.wake = make(chan struct{})
	p.queued = true
	q.waiting = append(q.waiting, p)
	c.mu.Unlock()
	l.await(p)
	return p.d, p.denied, p.now, p.err
}

// await waits for a queued take's answer, or for the batch it is to send.
// A caller whose context ends while its take is queued leaves with the
// failure policy's answer: nothing was sent. Once taken into a batch it
// waits for the batch's statement, which its Timeout bounds.
func (l *Limiter) await(p *pending) {
	select {
	case <-p.wake:
	case <-p.ctx.Done():
		if l.co.leave(p) {
			l.failed(p, remote.Unsent{Err: p.ctx.Err()}, true)
			return
		}
		<-p.wake
	}
	if p.lead != nil {
		l.lead(p, p.lead)
	}
}

// leave takes p out of its key's queue if it is still there.
func (c *coalescer) leave(p *pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !p.queued {
		return false
	}
	q := c.keys[p.rk]
	i := slices.Index(q.waiting, p)
	q.waiting = slices.Delete(q.waiting, i, i+1)
	p.queued = false
	return true
}

// lead sends batch, which leader sends for its key, hands the key's next
// batch, if takes are waiting, to the first of them (else the key is idle
// again), and wakes the batch's other takes, answered.
func (l *Limiter) lead(leader *pending, batch []*pending) {
	l.send(batch)
	l.co.handOff(leader.rk)
	for _, p := range batch {
		if p != leader {
			close(p.wake)
		}
	}
}

// handOff gives the next batch of rk's waiting takes to the first of them
// to send, or marks rk idle if none waits.
func (c *coalescer) handOff(rk string) {
	c.mu.Lock()
	q := c.keys[rk]
	if len(q.waiting) == 0 {
		delete(c.keys, rk)
		c.mu.Unlock()
		return
	}
	// One statement decides at one time: a batch is a run of takes given
	// the same one (only tests give one).
	k := 1
	for k < len(q.waiting) && k < maxBatch && sameAt(q.waiting[k].at, q.waiting[0].at) {
		k++
	}
	next := slices.Clone(q.waiting[:k])
	rest := copy(q.waiting, q.waiting[k:])
	clear(q.waiting[rest:])
	q.waiting = q.waiting[:rest]
	for _, p := range next {
		p.queued = false
	}
	next[0].lead = next
	c.mu.Unlock()
	close(next[0].wake)
}

func sameAt(a, b *int64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// send decides batch, takes of one key of l, in one statement, which
// decides each as if it came alone, in order, at one reading of the
// database's clock. Takes whose callers have gone are answered without
// asking. The statement runs under the context of a lone take (as an
// unbatched call would) and otherwise under none of the callers': one
// caller leaving must not fail the others' takes. Its deadline is then the
// Limiter's Timeout.
func (l *Limiter) send(batch []*pending) {
	live := make([]*pending, 0, len(batch))
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			l.failed(p, remote.Unsent{Err: err}, true)
			continue
		}
		live = append(live, p)
	}
	n := len(live)
	if n == 0 {
		return
	}
	ctx := live[0].ctx
	if n > 1 {
		ctx = context.WithoutCancel(ctx)
	}
	u := l.s.u
	key := []byte(live[0].rk)
	keys := make([][]byte, n)
	costs := make([]int64, n)
	for i, p := range live {
		keys[i], costs[i] = key, int64(p.cost)
	}
	var nowUS int64
	var den []bool
	var ats, qs []int64
	err := l.query(ctx, l.s.take, []any{keys, int64(u.capacity), u.pArg, u.qArg, costs, l.s.lockMS, live[0].at}, &nowUS, &den, &ats, &qs)
	if err == nil && (len(den) != n || len(ats) != n || len(qs) != n) {
		err = fmt.Errorf("%w: %d states for %d takes", errReply, len(ats), n)
	}
	for i, p := range live {
		if err != nil {
			l.failed(p, err, false)
			continue
		}
		d, derr := decision(u, p.cost, den[i], ats[i], qs[i], nowUS)
		if derr != nil {
			l.failed(p, fmt.Errorf("take 0: %w", derr), den[i])
			continue
		}
		p.d, p.now, p.denied = d, time.UnixMicro(nowUS), -1
		if d.Allowed {
			l.core.Counters.Allowed.Add(1)
		} else {
			p.denied = 0
			l.core.Counters.Denied.Add(1)
		}
	}
}

// failed answers p, which the store could not decide because of err, with
// the failure policy's answer, counted, and the classified error: nothing
// was taken when nothingTaken, err says so or p's cost takes nothing.
func (l *Limiter) failed(p *pending, err error, nothingTaken bool) {
	var out [1]engine.Decision
	nothingTaken = nothingTaken || p.cost == 0 || p.cost == l.s.u.never()
	p.denied, p.err = l.fail([]engine.Take{{Limiter: l, Key: p.key, N: p.n}}, out[:], err, nothingTaken)
	p.d = out[0]
}
