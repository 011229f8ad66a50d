package remote

import (
	"sync"
	"time"

	"github.com/faucetgo/faucet/internal/failpolicy"
)

// Background runs a Store's loops (the heartbeat, a sweeper) until Stop,
// and keeps the count of instances its heartbeat finds. Use
// NewBackground.
type Background struct {
	peers failpolicy.Peers
	stop  chan struct{}
	done  sync.WaitGroup
	once  sync.Once
}

// NewBackground returns a Background with no loop running.
func NewBackground() *Background { return &Background{stop: make(chan struct{})} }

// Peers returns the instances sharing the store as the heartbeats last
// counted them.
func (b *Background) Peers() *failpolicy.Peers { return &b.peers }

// Go runs loop in a goroutine of its own; loop returns once stop is
// closed.
func (b *Background) Go(loop func(stop <-chan struct{})) {
	b.done.Go(func() { loop(b.stop) })
}

// Heartbeat runs the store's heartbeat every `every` (a Heartbeat option:
// 0 picks failpolicy.DefaultHeartbeat, negative none), each beat bounded by
// timeout, recording its counts in Peers. beat returns the Beat of an
// instance that beats every given interval.
func (b *Background) Heartbeat(every, timeout time.Duration, beat func(every time.Duration) failpolicy.Beat) {
	if every = failpolicy.HeartbeatEvery(every); every > 0 {
		beats := beat(every)
		b.Go(func(stop <-chan struct{}) { failpolicy.Heartbeat(stop, every, timeout, beats, &b.peers, nil) })
	}
}

// Stop stops the loops and waits for them to return. Stopping twice does
// nothing more.
func (b *Background) Stop() {
	b.once.Do(func() { close(b.stop) })
	b.done.Wait()
}
