package conncap

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// MaxWaiting is the most new connections waiting for a slot at once;
	// one more is refused at once.
	MaxWaiting = 64
	// DefaultGrace is how long a connection silent since it connected
	// must have been open before it may be evicted: a client that has just
	// connected is about to send. One idle after a request may be evicted
	// at once, as its client would retry on a new connection.
	DefaultGrace = time.Second
	// evictScan bounds the quiet connections looked at per eviction, so
	// that a list of ones whose requests wait in their sockets costs no
	// more than that.
	evictScan = 16
	// rescan is how often a waiting connection looks again when every
	// candidate had bytes waiting that the server has yet to read.
	rescan = 50 * time.Millisecond
)

// Config configures a Listener.
type Config struct {
	// Max is the most connections open at once, at least 1.
	Max int
	// Wait bounds how long a new connection waits for a slot.
	Wait time.Duration
	// Grace is how long a connection silent since it connected must have
	// been open before it may be evicted; 0 means DefaultGrace.
	Grace time.Duration
	// Calls says that the server reports its work with Begin and End, as
	// a gRPC server does, rather than with ConnState as an http.Server
	// does; a connection refused at the cap is then closed, not answered
	// 503.
	Calls bool
}

// Listener is a net.Listener that holds at most Config.Max connections
// open; see the package documentation for the policy. It is safe for
// concurrent use.
type Listener struct {
	net.Listener
	max   int
	wait  time.Duration
	grace time.Duration
	calls bool

	mu      sync.Mutex
	open    int                      // connections holding a slot; guarded by mu
	quiet   list                     // quiet longest first; guarded by mu
	waiting int                      // new connections waiting for a slot; guarded by mu
	wake    chan struct{}            // closed when a slot may have come free, if someone waits; guarded by mu
	byAddr  map[netip.AddrPort]*Conn // with Calls; guarded by mu

	ready     chan net.Conn
	errs      chan error
	done      chan struct{}
	startOnce sync.Once
	closeOnce sync.Once

	refusing          atomic.Int32
	evicted, rejected atomic.Uint64
}

// Conn is a connection of a Listener; Close frees its slot.
type Conn struct {
	net.Conn
	l *Listener
	// heard is set by a Read that returned bytes since the server last
	// reported the connection idle: a request has begun.
	heard atomic.Bool

	// The rest is guarded by l.mu.
	prev, next *Conn
	inQuiet    bool
	quietSince time.Time
	used       bool           // it carried a request or call
	calls      int            // calls in flight, with Config.Calls
	addr       netip.AddrPort // the key in l.byAddr, with Config.Calls
	// closed is set once Close freed the slot: later reports do not make
	// the connection quiet again.
	closed bool
	once   sync.Once
}

// New caps ln as cfg says.
func New(ln net.Listener, cfg Config) (*Listener, error) {
	if cfg.Max < 1 {
		return nil, errors.New("conncap: Max must be at least 1")
	}
	if cfg.Wait <= 0 {
		return nil, errors.New("conncap: Wait must be positive")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	l := &Listener{Listener: ln, max: cfg.Max, wait: cfg.Wait, grace: cfg.Grace, calls: cfg.Calls,
		ready: make(chan net.Conn), errs: make(chan error), done: make(chan struct{})}
	if cfg.Calls {
		l.byAddr = make(map[netip.AddrPort]*Conn)
	}
	return l, nil
}

// Accept returns the next connection that got a slot.
func (l *Listener) Accept() (net.Conn, error) {
	l.startOnce.Do(func() { go l.acceptLoop() })
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// acceptLoop accepts connections and gives each a slot, a place among the
// waiting, or a refusal, so that a connection waiting for a slot holds up
// no other.
func (l *Listener) acceptLoop() {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		c := &Conn{Conn: nc, l: l}
		ok, _, _ := l.acquire(c, false)
		if ok {
			l.deliver(c)
			continue
		}
		l.mu.Lock()
		wait := l.waiting < MaxWaiting
		if wait {
			l.waiting++
		}
		l.mu.Unlock()
		if !wait {
			l.refuse(nc)
			continue
		}
		go l.waitSlot(c)
	}
}

// deliver hands c, which holds a slot, to Accept.
func (l *Listener) deliver(c *Conn) {
	select {
	case l.ready <- c:
	case <-l.done:
		c.Close()
	}
}

// waitSlot waits up to l.wait for a slot for c, then delivers or refuses
// it.
func (l *Listener) waitSlot(c *Conn) {
	defer func() {
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
	}()
	deadline := time.NewTimer(l.wait)
	defer deadline.Stop()
	var retry *time.Timer
	for {
		ok, after, wake := l.acquire(c, true)
		if ok {
			l.deliver(c)
			return
		}
		var retryC <-chan time.Time
		if after > 0 {
			if retry == nil {
				retry = time.NewTimer(after)
				defer retry.Stop()
			} else {
				retry.Reset(after)
			}
			retryC = retry.C
		}
		select {
		case <-wake:
		case <-retryC:
		case <-deadline.C:
			l.refuse(c.Conn)
			return
		case <-l.done:
			c.Conn.Close()
			return
		}
	}
}

// acquire gives c a slot if one is free or can be freed by evicting a quiet
// connection. Otherwise it returns when to look again, if a connection's
// grace ends or a waiting request may have been read by then, and, if
// wantWake, a channel closed when a slot may have come free.
func (l *Listener) acquire(c *Conn, wantWake bool) (ok bool, retry time.Duration, wake <-chan struct{}) {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.enter(c)
			l.mu.Unlock()
			return true, 0, nil
		}
		victim, retry := l.victim(time.Now())
		if victim == nil {
			if wantWake {
				if l.wake == nil {
					l.wake = make(chan struct{})
				}
				wake = l.wake
			}
			l.mu.Unlock()
			return false, retry, wake
		}
		l.mu.Unlock()
		victim.Close() // frees its slot before returning
		l.evicted.Add(1)
	}
}

// enter registers c, which just took a slot, as quiet since now.
// l.mu is held.
func (l *Listener) enter(c *Conn) {
	if l.calls {
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			c.addr = ta.AddrPort()
			l.byAddr[c.addr] = c
		}
	}
	c.quietSince = time.Now()
	l.quiet.pushBack(c)
}

// victim takes out of the quiet list and returns the connection to evict,
// if any may be. Otherwise it tells when to look again, if a connection's
// grace ends or a request waiting in a socket may have been read by then.
// l.mu is held.
func (l *Listener) victim(now time.Time) (*Conn, time.Duration) {
	c, skipped, retry := l.quiet.front, false, time.Duration(0)
	for n := 0; c != nil && n < evictScan; n++ {
		next := c.next
		switch quiet := now.Sub(c.quietSince); {
		case !c.used && quiet < l.grace:
			if retry == 0 {
				retry = l.grace - quiet // the first has the least left
			}
		case !l.calls && c.heard.Load():
			// A request has begun; ConnState makes it quiet again once
			// answered.
			l.quiet.remove(c)
		case pending(c.Conn):
			// Its request waits in the socket; once read, the server
			// reports the connection busy, and idle after.
			skipped = true
		default:
			l.quiet.remove(c)
			return c, 0
		}
		c = next
	}
	if c != nil || skipped {
		retry = rescan
	}
	return nil, retry
}

// wakeLocked wakes the connections waiting for a slot. l.mu is held.
func (l *Listener) wakeLocked() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// quietLocked makes c quiet from now, if it holds a slot. l.mu is held.
func (l *Listener) quietLocked(c *Conn) {
	if c.closed || c.inQuiet {
		return
	}
	c.quietSince = time.Now()
	l.quiet.pushBack(c)
	l.wakeLocked()
}

// Close closes the listener; connections waiting for a slot are closed.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// ConnState is the http.Server's ConnState hook. StateNew and StateIdle
// make a connection quiet, unless bytes of a request arrive (see Conn.Read);
// StateActive, StateHijacked and StateClosed make it busy, a hijacked one
// until the connection the handler took over is closed.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*Conn)
	if !ok || c.l != l {
		return
	}
	switch state {
	case http.StateNew:
		// enter made it quiet when it took its slot, and nothing was
		// read since.
	case http.StateIdle:
		// Bytes read from now on are the next request's.
		c.heard.Store(false)
		l.mu.Lock()
		c.used = true
		l.quietLocked(c)
		l.mu.Unlock()
	default:
		l.mu.Lock()
		if c.inQuiet {
			l.quiet.remove(c)
		}
		l.mu.Unlock()
	}
}

// Begin tells that a call from the connection of remote address addr has
// begun, making that connection busy until End. It returns nil if addr is
// no connection of l.
func (l *Listener) Begin(addr net.Addr) *Conn {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || !l.calls {
		return nil
	}
	l.mu.Lock()
	c := l.byAddr[ta.AddrPort()]
	if c != nil {
		c.calls++
		if c.inQuiet {
			l.quiet.remove(c)
		}
	}
	l.mu.Unlock()
	return c
}

// End tells that a call begun by Begin ended; the connection is quiet
// again when it was the last. End of nil does nothing.
func (c *Conn) End() {
	if c == nil {
		return
	}
	l := c.l
	l.mu.Lock()
	c.used = true
	if c.calls--; c.calls == 0 {
		l.quietLocked(c)
	}
	l.mu.Unlock()
}

// Read marks the connection busy once a read returns bytes: a request has
// begun, though the server may report so only once its header is whole.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.l.calls && !c.heard.Load() {
		c.heard.Store(true)
	}
	return n, err
}

// Close closes the connection and frees its slot.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// release frees c's slot and wakes the connections waiting for one.
func (c *Conn) release() {
	l := c.l
	l.mu.Lock()
	if c.inQuiet {
		l.quiet.remove(c)
	}
	if l.calls && l.byAddr[c.addr] == c {
		delete(l.byAddr, c.addr)
	}
	c.closed = true
	l.open--
	l.wakeLocked()
	l.mu.Unlock()
}

// Stats returns the connections open now, and how many were closed so far
// to make room (evicted) and refused for want of it (rejected).
func (l *Listener) Stats() (open int, evicted, rejected uint64) {
	l.mu.Lock()
	open = l.open
	l.mu.Unlock()
	return open, l.evicted.Load(), l.rejected.Load()
}

// list is a doubly linked list of connections threaded through the
// connections themselves: a connection goes quiet after every request, and
// container/list would allocate an element each time.
type list struct {
	front, back *Conn
	n           int
}

// pushBack appends c, which is in no list, to q.
func (q *list) pushBack(c *Conn) {
	c.prev, c.next = q.back, nil
	if q.back != nil {
		q.back.next = c
	} else {
		q.front = c
	}
	q.back = c
	c.inQuiet = true
	q.n++
}

// remove takes c, which is in q, out of it.
func (q *list) remove(c *Conn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.front = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.back = c.prev
	}
	c.prev, c.next = nil, nil
	c.inQuiet = false
	q.n--
}
