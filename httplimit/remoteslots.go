package httplimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
)

// remoteSlots is an in-flight limit kept in a shared store (engine.Slots),
// whose slots the processes sharing it count together.
type remoteSlots struct {
	s engine.Slots
	// fallback counts this process's requests while the store fails, for
	// a rule with fail_mode fallback: at its share of the limit.
	fallback *inFlight
}

// remoteHold is one slot a request holds in a shared store.
type remoteHold struct {
	s           engine.Slots
	key, holder string
}

// releaseTimeout bounds the release of a slot in a shared store; one that
// fails is retried until it expires with its TTL.
const releaseTimeout = 2 * time.Second

// holderIDs makes the holder ids of this process's requests: a random
// prefix, which tells processes apart, and a count.
type holderIDs struct {
	prefix string
	n      atomic.Uint64
}

func newHolderIDs() *holderIDs {
	var b [8]byte
	rand.Read(b[:])
	return &holderIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (h *holderIDs) next() string { return h.prefix + strconv.FormatUint(h.n.Add(1), 36) }

// renewer keeps the slots this process holds in shared stores alive,
// renewing them all every third of the shortest TTL, one round trip per
// Slots.
type renewer struct {
	mu   sync.Mutex
	held map[*remoteHold]struct{} // guarded by mu
	ttl  time.Duration            // guarded by mu: the shortest TTL seen
	// unreleased are the slots whose release failed, each with when it
	// expires anyway: retried each second, so that a slot given back
	// while the store was stalled does not stay taken for a TTL once the
	// store answers again. At most maxUnreleased; guarded by mu.
	unreleased map[*remoteHold]time.Time
	// onError reports a failed renewal (Options.OnStoreError).
	onError    func(error)
	stop, done chan struct{}
}

func newRenewer(onError func(error)) *renewer {
	r := &renewer{held: map[*remoteHold]struct{}{}, unreleased: map[*remoteHold]time.Time{}, onError: onError,
		stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

func (r *renewer) add(h *remoteHold) {
	r.mu.Lock()
	r.held[h] = struct{}{}
	if t := h.s.TTL(); r.ttl == 0 || t < r.ttl {
		r.ttl = t
	}
	r.mu.Unlock()
}

func (r *renewer) remove(h *remoteHold) {
	r.mu.Lock()
	delete(r.held, h)
	r.mu.Unlock()
}

// maxUnreleased bounds the failed releases kept for a retry: a long
// outage under load fails more, and those beyond expire with their TTL.
const maxUnreleased = 10000

// retryRelease keeps h, whose release failed at now, for a retry until it
// would have expired.
func (r *renewer) retryRelease(h *remoteHold, now time.Time) {
	r.mu.Lock()
	if len(r.unreleased) < maxUnreleased {
		r.unreleased[h] = now.Add(h.s.TTL())
	}
	r.mu.Unlock()
}

// loop renews until close: it checks every 200 ms (a fifth of the
// shortest TTL a store allows) whether a third of the shortest TTL has
// passed since the last renewal; and each second it retries the failed
// releases.
func (r *renewer) loop() {
	defer close(r.done)
	tk := time.NewTicker(200 * time.Millisecond)
	defer tk.Stop()
	last, retried := time.Now(), time.Now()
	for {
		select {
		case <-r.stop:
			return
		case now := <-tk.C:
			if now.Sub(retried) >= time.Second {
				retried = now
				r.release(now)
			}
			r.mu.Lock()
			ttl := r.ttl
			r.mu.Unlock()
			if ttl == 0 || now.Sub(last) < ttl/3 {
				continue
			}
			last = now
			r.renew(ttl / 3)
		}
	}
}

// release retries the failed releases, dropping those expired by now; it
// stops at the first that fails again, as the store still does.
func (r *renewer) release(now time.Time) {
	r.mu.Lock()
	var todo []*remoteHold
	for h, expires := range r.unreleased {
		if now.After(expires) {
			delete(r.unreleased, h)
			continue
		}
		todo = append(todo, h)
	}
	r.mu.Unlock()
	for _, h := range todo {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := h.s.Release(ctx, h.key, h.holder)
		cancel()
		if err != nil {
			return
		}
		r.mu.Lock()
		delete(r.unreleased, h)
		r.mu.Unlock()
	}
}

// renew renews every held slot, within timeout.
func (r *renewer) renew(timeout time.Duration) {
	by := map[engine.Slots][]engine.SlotHold{}
	r.mu.Lock()
	for h := range r.held {
		by[h.s] = append(by[h.s], engine.SlotHold{Key: h.key, Holder: h.holder})
	}
	r.mu.Unlock()
	for s, holds := range by {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := s.Renew(ctx, holds)
		cancel()
		if err != nil && r.onError != nil {
			r.onError(fmt.Errorf("httplimit: renewing %d in-flight slots: %w", len(holds), err))
		}
	}
}

func (r *renewer) close() {
	close(r.stop)
	<-r.done
}

// acquireRemote takes a slot of remote in-flight limit ru (policy p) for
// q, into q's scratch. It reports false when the request is refused: by
// the limit (429), or by the store's failure under fail_mode closed (503).
func (l *Middleware) acquireRemote(q *request, now time.Time, res *Result, ru *rule, p *Policy) (ok, denied bool) {
	rs := ru.remote
	holder := l.holders.next()
	key := strings.Clone(p.Key)
	took, n, err := rs.s.Acquire(q.r.Context(), key, holder, ru.MaxInFlight)
	if err != nil {
		if l.opts.onStoreError != nil {
			l.opts.onStoreError(err)
		}
		res.StoreError = true
		if errors.Is(err, engine.ErrOutcomeUnknown) {
			// It may have taken one: give it back, or it expires.
			go l.releaseRemote(&remoteHold{s: rs.s, key: key, holder: holder})
		}
		switch {
		case ru.open:
			p.Unknown = true
			ru.counters.failedOpen.Add(1)
			return true, false
		case ru.closed:
			ru.counters.failedClosed.Add(1)
			return false, false
		}
		// The fallback: this process's own count, at its share.
		share := max(1, ru.MaxInFlight/l.peers())
		s, n := rs.fallback.acquireUpTo(p.Key, int64(share))
		p.Fallback = true
		ru.counters.fellBack.Add(1)
		p.Remaining = float64(max(int64(share)-n, 0))
		if s == nil {
			return false, true
		}
		q.sc.slots[q.sc.nslots] = heldSlot{f: rs.fallback, s: s}
		q.sc.nslots++
		return true, false
	}
	p.Remaining = float64(max(ru.MaxInFlight-n, 0))
	if !took {
		return false, true
	}
	h := &remoteHold{s: rs.s, key: key, holder: holder}
	if rn := l.renewals(); rn != nil {
		rn.add(h)
	}
	q.sc.slots[q.sc.nslots] = heldSlot{f: rs.fallback, remote: h}
	rs.fallback.remoteHeld.Add(1)
	q.sc.nslots++
	return true, false
}

// peers is how many processes share the store, for a fallback's share: 1
// if the store cannot tell.
func (l *Middleware) peers() int {
	if p, ok := l.opts.store.(interface{ Peers() *failpolicy.Peers }); ok {
		return p.Peers().N()
	}
	return 1
}

// releaseRemote gives back a slot of a shared store, and stops renewing
// it: if the release fails, it is retried each second until it would have
// expired.
func (l *Middleware) releaseRemote(h *remoteHold) {
	rn := l.renewals()
	if rn != nil {
		rn.remove(h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := h.s.Release(ctx, h.key, h.holder)
	if err == nil {
		return
	}
	if rn != nil {
		rn.retryRelease(h, time.Now())
	}
	if l.opts.onStoreError != nil {
		l.opts.onStoreError(fmt.Errorf("httplimit: releasing an in-flight slot (retried until it expires): %w", err))
	}
}

// renewals is the Middleware's renewer, started with its first remote
// slot; nil once the Middleware is closed.
func (l *Middleware) renewals() *renewer {
	l.renewOnce.Do(func() { l.renew = newRenewer(l.opts.onStoreError) })
	return l.renew
}

// remoteOf gives in-flight limit r, on a shared store, the Slots of its
// ID: the ones bound before, kept across reloads, or new ones.
func (l *Middleware) remoteOf(r *rule, id string, ss engine.SlotStore, local *inFlight) error {
	rs := l.remoteSlots[id]
	if rs == nil {
		s, err := ss.BindSlots(id)
		if err != nil {
			return fmt.Errorf("httplimit: in-flight limit %q: %w", r.Name, err)
		}
		rs = &remoteSlots{s: s}
		l.remoteSlots[id] = rs
	}
	rs.fallback = local
	r.remote = rs
	return nil
}

// closeRemote stops renewing and closes every Slots bound: the slots
// still held expire.
func (l *Middleware) closeRemote() {
	l.renewOnce.Do(func() {}) // none starts after this
	if l.renew != nil {
		l.renew.close()
	}
	for _, rs := range l.remoteSlots {
		rs.s.Close()
	}
}
