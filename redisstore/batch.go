package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/remote"
)

// Single-key checks of one Limiter that arrive while maxInFlight of its
// batches are on their way wait and then go together, up to Config.MaxBatch
// in one script (takeEachScript), which decides each as if it were alone, in
// arrival order, at one reading of the server's clock. A check that finds a
// free slot goes at once, so a lone caller waits for nothing; under load the
// checks share a round trip, the script's fixed cost and the server's clock
// reading, which are most of a check's cost (see BENCHMARKS.md). Takes of
// one key in one batch see each other as consecutive calls do.
//
// Redis Cluster clients (and go-redis Rings) do not batch: one script's keys
// must share a hash slot, which keys of different callers rarely do. Their
// checks go alone, through the same script.
const maxInFlight = 4

// batcher is a Limiter's queue of checks waiting for a script.
type batcher struct {
	mu       sync.Mutex // guards inFlight and queue
	inFlight int        // scripts sent and not yet answered
	queue    []*pending
}

// pending is one check in or waiting for a batch. Whoever moves state from
// waiting answers it: the sender (answered: it fills d, now and err, then
// closes done) or a caller whose context ended while it waited (gone).
type pending struct {
	ctx   context.Context
	key   string // the caller's key
	rkey  string // its Redis key
	n     float64
	cost  uint64
	since time.Time // arrival: the check's deadline is since+Timeout
	state atomic.Int32
	done  chan struct{}
	d     engine.Decision
	now   int64
	err   error
}

const (
	waiting int32 = iota
	answered
	gone
)

// takeOne is Take: through the batcher, or alone when the Limiter does
// not batch. It returns the server's time of the decision (zero on a store
// failure).
func (l *Limiter) takeOne(ctx context.Context, key string, n float64) (engine.Decision, time.Time, error) {
	p := &pending{ctx: ctx, key: key, rkey: l.KeyFor(key), n: n, cost: l.scriptCost(n), since: time.Now()}
	if !l.batches {
		l.runBatch([]*pending{p}, false)
		return p.result()
	}
	p.done = make(chan struct{})
	b := &l.batch
	b.mu.Lock()
	if b.inFlight < maxInFlight {
		b.inFlight++
		b.mu.Unlock()
		l.send([]*pending{p}, false)
	} else {
		b.queue = append(b.queue, p)
		b.mu.Unlock()
		l.await(p)
	}
	return p.result()
}

// result is an answered check's Decision, time and error.
func (p *pending) result() (engine.Decision, time.Time, error) {
	if p.err != nil {
		return p.d, time.Time{}, p.err
	}
	return p.d, time.UnixMicro(p.now), nil
}

// await waits for a queued check's answer, or for its context to end.
func (l *Limiter) await(p *pending) {
	if stop := p.ctx.Done(); stop != nil {
		select {
		case <-p.done:
			return
		case <-stop:
			if l.batch.remove(p) {
				// Still queued: never sent.
				p.d, p.err = l.failedOne(p, remote.Unsent{Err: p.ctx.Err()})
				return
			}
			// In a batch already: if it was sent the check may still be
			// made (see the package documentation, Failure).
			if p.state.CompareAndSwap(waiting, gone) {
				p.d, p.err = l.failedOne(p, p.ctx.Err())
				return
			}
		}
	}
	<-p.done
}

// remove takes p out of the queue, if it is still there, and marks it gone.
func (b *batcher) remove(p *pending) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.queue, p)
	if i < 0 {
		return false
	}
	b.queue = slices.Delete(b.queue, i, i+1)
	p.state.Store(gone)
	return true
}

// failedOne counts p as a store failure and returns the policy's answer and
// the error to return for err (see storeError).
func (l *Limiter) failedOne(p *pending, err error) (engine.Decision, error) {
	var out [1]engine.Decision
	_, err = l.fail([]engine.Take{{Limiter: l, Key: p.key, N: p.n}}, out[:], err, remote.IsUnsent(err) || !l.s.u.takes(p.cost))
	return out[0], err
}

// send runs one batch, answers its checks, and hands its slot to the next
// batch if checks are waiting. queued tells a batch from the queue from a
// lone check sent by its own caller.
func (l *Limiter) send(batch []*pending, queued bool) {
	live := make([]*pending, 0, len(batch))
	for _, p := range batch {
		switch {
		case p.state.Load() == gone:
		case queued && p.ctx.Err() != nil:
			// Its caller is about to leave: answer it without asking.
			l.finish(p, engine.Decision{}, 0, remote.Unsent{Err: p.ctx.Err()})
		default:
			live = append(live, p)
		}
	}
	if len(live) > 0 {
		l.runBatch(live, queued)
	}
	for _, p := range batch {
		close(p.done)
	}
	b := &l.batch
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.inFlight--
		b.mu.Unlock()
		return
	}
	k := min(len(b.queue), l.s.maxBatch)
	next := make([]*pending, k)
	copy(next, b.queue)
	rest := copy(b.queue, b.queue[k:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.mu.Unlock()
	go l.send(next, true)
}

// runBatch decides batch, checks of this Limiter, in one script.
func (l *Limiter) runBatch(batch []*pending, queued bool) {
	s := l.s
	keys := make([]string, len(batch))
	args := make([]string, 4, 4+len(batch))
	args[0], args[1], args[2], args[3] = s.capArg, s.pArg, s.qArg, s.fillArg
	for i, p := range batch {
		keys[i] = p.rkey
		args = append(args, strconv.FormatUint(p.cost, 10))
	}
	// A check sent by its caller runs under the caller's context (call adds
	// the Timeout). Queued checks' deadline is their oldest's, arrival plus
	// Timeout, so that none waits beyond its own; a batch of several is
	// bound to no caller's context, as each caller leaves on its own.
	ctx := batch[0].ctx
	if queued {
		if len(batch) > 1 {
			ctx = context.Background()
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, batch[0].since.Add(s.Timeout))
		defer cancel()
	}
	v, err := l.call(ctx, takeEachLua, keys, args)
	if err == nil && len(v) != 1+3*len(batch) {
		err = fmt.Errorf("%w: %d integers for %d takes", errReply, len(v), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			l.finish(p, engine.Decision{}, 0, err)
			continue
		}
		r := v[1+3*i:]
		d, derr := decision(s.u, p.cost, r[0] != 0, r[1], r[2], v[0])
		l.finish(p, d, v[0], derr)
	}
}

// finish answers p unless its caller has gone: with d, or on err with the
// policy's answer and the classified error (failedOne), and counts it.
func (l *Limiter) finish(p *pending, d engine.Decision, now int64, err error) {
	if !p.state.CompareAndSwap(waiting, answered) {
		return
	}
	p.now = now
	switch {
	case err != nil:
		p.d, p.err = l.failedOne(p, err)
	case d.Allowed:
		p.d = d
		l.core.Counters.Allowed.Add(1)
	default:
		p.d = d
		l.core.Counters.Denied.Add(1)
	}
}
