package pgrules

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/jackc/pgx/v5"
)

// WatchOptions configures a Watcher; the zero value is usable.
type WatchOptions struct {
	// Channel is the channel the trigger notifies (Install's); "" is
	// DefaultChannel.
	Channel string
	// Poll is how often the table is read without a notification, in case
	// one was missed (the trigger dropped, a notification lost while the
	// listening connection was down); 0 is a minute.
	Poll time.Duration
	// MinBackoff and MaxBackoff bound the wait before the listening
	// connection is opened again after it failed, and before a read that
	// found nothing usable is tried again: doubled from MinBackoff after
	// each failure, back to it after a success. 0 is 250 ms and 15 s.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one read of the table, and opening the listening
	// connection; 0 is 10 s.
	Timeout time.Duration
	// OnListenError, if set, is called with each failure of the listening
	// connection, before it is opened again.
	OnListenError func(error)
}

// Watcher reads a Source whenever its table may have changed: on a
// notification of its trigger, on every poll, after the listening
// connection is opened (again), on Refresh, and after a backoff when a
// read found nothing usable.
type Watcher struct {
	src     *Source
	o       WatchOptions
	channel string
	kick    chan struct{} // a read is due; capacity 1, so reads coalesce

	mu      sync.Mutex
	last    reading // the reading last returned or delivered; guarded by mu
	forced  bool    // Refresh asked: deliver the next reading, changed or not; guarded by mu
	started bool    // guarded by mu
}

// reading is one result of Source.Rules.
type reading struct {
	rules []httplimit.Rule
	err   string
}

// NewWatcher returns a Watcher of src; Read and Run use it.
func NewWatcher(src *Source, o WatchOptions) (*Watcher, error) {
	ch, err := channelName(o.Channel)
	if err != nil {
		return nil, err
	}
	if _, err := ParseTable(src.Table); err != nil {
		return nil, err
	}
	if o.Poll <= 0 {
		o.Poll = time.Minute
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 250 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 15 * time.Second
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	return &Watcher{src: src, o: o, channel: ch, kick: make(chan struct{}, 1)}, nil
}

// Read reads the rules now (Source.Rules) and remembers the reading: Run
// delivers only readings that differ from it.
func (w *Watcher) Read(ctx context.Context) ([]httplimit.Rule, error) {
	rules, err := w.read(ctx)
	w.mu.Lock()
	w.last = reading{rules, errText(err)}
	w.mu.Unlock()
	return rules, err
}

func (w *Watcher) read(ctx context.Context) ([]httplimit.Rule, error) {
	ctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
	defer cancel()
	return w.src.Rules(ctx)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Refresh makes Run read the table at once and deliver the reading even if
// it did not change (for SIGHUP).
func (w *Watcher) Refresh() {
	w.mu.Lock()
	w.forced = true
	w.mu.Unlock()
	w.due()
}

func (w *Watcher) due() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run reads the table whenever it may have changed and calls fn, from
// Run's goroutine, with every reading that differs from the one before
// (the rules, or the error's text): a failure that repeats is delivered
// once. It returns when ctx is done, its listening connection closed. Run
// may be called once.
func (w *Watcher) Run(ctx context.Context, fn func([]httplimit.Rule, error)) {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		panic("pgrules: Watcher.Run called twice")
	}
	w.started = true
	w.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { w.listen(ctx) })
	defer wg.Wait()
	poll := time.NewTicker(w.o.Poll)
	defer poll.Stop()
	// A read that failed is tried again after a backoff: the next
	// notification may be far off, and a pool's connections to a server
	// that restarted fail once each.
	var retry <-chan time.Time
	backoff := w.o.MinBackoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-w.kick:
		case <-retry:
		}
		rules, err := w.read(ctx)
		if ctx.Err() != nil {
			return
		}
		retry = nil
		if rules == nil && err != nil {
			retry = time.After(backoff)
			backoff = min(2*backoff, w.o.MaxBackoff)
		} else {
			backoff = w.o.MinBackoff
		}
		now := reading{rules, errText(err)}
		w.mu.Lock()
		deliver := w.forced || !reflect.DeepEqual(now, w.last)
		w.forced, w.last = false, now
		w.mu.Unlock()
		if deliver {
			fn(rules, err)
		}
	}
}

// listen keeps a connection listening on the channel, opening it again
// after a backoff whenever it fails, until ctx is done.
func (w *Watcher) listen(ctx context.Context) {
	backoff := w.o.MinBackoff
	for {
		worked, err := w.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if worked {
			backoff = w.o.MinBackoff
		}
		if w.o.OnListenError != nil {
			w.o.OnListenError(err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, w.o.MaxBackoff)
	}
}

// listenOnce opens a connection, listens, and asks for a read after each
// notification, until the connection fails; worked says it got as far as
// listening.
func (w *Watcher) listenOnce(ctx context.Context) (worked bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, w.src.DB.Config().ConnConfig)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{w.channel}.Sanitize()); err != nil {
		return false, err
	}
	// Whatever changed while nobody listened was not notified.
	w.due()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		w.due()
	}
}
