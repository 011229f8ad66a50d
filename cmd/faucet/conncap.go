package main

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connCap is a listener that holds at most max connections open, and
// whose cap idle connections cannot use up to lock new clients out.
//
// A connection is quiet while no request is in progress on it: idle
// between requests on keep-alive, or silent since it connected (the
// server's ConnState reports both; see ConnState). When a new connection
// arrives at the cap, the connection quiet longest is closed to make room,
// as an idle or read-header timeout would close it later anyway; a client
// that reuses it sees a closed keep-alive connection, which HTTP clients
// retry. Only when every connection is busy does the new one wait, up to
// wait, for one to close; the server's timeouts bound how long that takes.
// One that waits longer is closed unserved.
//
// golang.org/x/net/netutil.LimitListener caps connections too, but only by
// waiting, so idle connections at the cap would lock new clients out until
// the idle timeout.
type connCap struct {
	net.Listener
	max  int
	wait time.Duration

	mu    sync.Mutex
	open  int       // connections accepted and not yet closed; guarded by mu
	quiet quietList // quiet longest first; guarded by mu

	freed     chan struct{} // a slot was freed (capacity 1)
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	evicted, rejected atomic.Uint64
}

// cappedConn is a connection of a connCap, which frees its slot on Close.
type cappedConn struct {
	net.Conn
	cap *connCap
	// prev and next link it into cap.quiet while inQuiet; guarded by
	// cap.mu.
	prev, next *cappedConn
	inQuiet    bool
	// closed is set, under cap.mu, once Close freed the slot: states the
	// server reports later do not make it quiet again.
	closed bool
	once   sync.Once
}

// newConnCap caps ln at max connections; a new connection waits at most
// wait for a busy one to close.
func newConnCap(ln net.Listener, max int, wait time.Duration) *connCap {
	return &connCap{Listener: ln, max: max, wait: wait, freed: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept returns the next connection that gets a slot. It closes the ones
// that wait too long for one, and goes on accepting.
func (l *connCap) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.admit() {
			return &cappedConn{Conn: c, cap: l}, nil
		}
		c.Close()
	}
}

// admit takes a slot for a new connection, closing the connection quiet
// longest if there is none. It reports false if no slot freed up within
// l.wait, or the listener was closed.
func (l *connCap) admit() bool {
	var timeout <-chan time.Time
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			return true
		}
		if victim := l.quiet.front; victim != nil {
			l.quiet.remove(victim)
			l.mu.Unlock()
			victim.Close() // frees its slot before returning
			l.evicted.Add(1)
			continue
		}
		l.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(l.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-l.freed:
		case <-timeout:
			l.rejected.Add(1)
			return false
		case <-l.done:
			return false
		}
	}
}

// Close closes the listener; an Accept waiting for a slot returns.
func (l *connCap) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// ConnState is the http.Server's ConnState hook: it keeps the list of
// quiet connections. StateNew (accepted, no byte of a request read yet) and
// StateIdle (between requests) are quiet; StateActive (a request has begun),
// StateHijacked and StateClosed are not.
func (l *connCap) ConnState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*cappedConn)
	if !ok {
		return
	}
	quiet := state == http.StateNew || state == http.StateIdle
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.closed:
	case quiet && !c.inQuiet:
		l.quiet.pushBack(c)
	case !quiet && c.inQuiet:
		l.quiet.remove(c)
	}
}

// Stats returns the connections open now, and how many were closed so far
// to make room (evicted) and for want of it (rejected).
func (l *connCap) Stats() (open int, evicted, rejected uint64) {
	l.mu.Lock()
	open = l.open
	l.mu.Unlock()
	return open, l.evicted.Load(), l.rejected.Load()
}

// quietList is a doubly linked list of connections threaded through the
// connections themselves: a connection goes quiet after every request, and
// container/list allocated an element each time.
type quietList struct {
	front, back *cappedConn
	n           int
}

// Len returns the number of connections in q.
func (q *quietList) Len() int { return q.n }

// pushBack appends c, which is in no list, to q.
func (q *quietList) pushBack(c *cappedConn) {
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
func (q *quietList) remove(c *cappedConn) {
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

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// release frees c's slot and tells an Accept waiting for one.
func (c *cappedConn) release() {
	l := c.cap
	l.mu.Lock()
	if c.inQuiet {
		l.quiet.remove(c)
	}
	c.closed = true
	l.open--
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default: // a wakeup is already pending
	}
}
