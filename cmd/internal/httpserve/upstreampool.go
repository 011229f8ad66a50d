package httpserve

import (
	"bufio"
	"context"
	"net"
	"sync"
	"time"
)

// upstreamConn is one HTTP/1.1 connection to the upstream, with its
// buffers: a request is written and its response read on the goroutine
// that serves the client, so forwarding costs no goroutine hand-offs.
type upstreamConn struct {
	net.Conn
	br *bufio.Reader
	bw *bufio.Writer
	// idleSince is when the connection was put back in the pool.
	idleSince time.Time
	// reused says that the connection carried a request before, so it
	// may have been closed by the upstream while idle.
	reused bool
	// headerLeft is how many more bytes a response header may take,
	// -1 while a body is read. Only the serving goroutine touches it.
	headerLeft int
	// probe looks for bytes the upstream sent while the connection idled.
	probe idleProbe
}

// Read reads from the upstream for br, within what is left of a
// response header's allowance while one is read.
func (c *upstreamConn) Read(p []byte) (int, error) {
	if c.headerLeft < 0 {
		return c.Conn.Read(p)
	}
	if c.headerLeft == 0 {
		return 0, errResponseHeaderTooLarge
	}
	if len(p) > c.headerLeft {
		p = p[:c.headerLeft]
	}
	n, err := c.Conn.Read(p)
	c.headerLeft -= n
	return n, err
}

// heardWhileIdle reports whether the upstream sent anything on an idle
// connection: bytes nobody asked for, which would be read as the answer
// to the next request, or the end of the stream.
func (c *upstreamConn) heardWhileIdle() bool {
	return c.br.Buffered() > 0 || c.probe.heard()
}

// upstreamPool keeps idle connections to one upstream address, most
// recently used first, so that a quiet period lets the oldest ones age out
// while the busy ones stay warm. It never limits how many connections are
// open, only how many wait idle: as many as requests in flight, like the
// transport of net/http without MaxConnsPerHost.
type upstreamPool struct {
	addr   string
	dialer *net.Dialer
	// maxIdle bounds the idle connections kept; one more is closed.
	maxIdle int
	// idleTimeout is how long an idle connection is kept.
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*upstreamConn // guarded by mu; the newest last
	closed bool            // guarded by mu
	done   chan struct{}   // closed by close, to stop the sweeper
}

// Buffer sizes of an upstream connection: a request header is small; a
// response header that does not fit in 4 KiB is still read, in more calls.
const upstreamBufferSize = 4 << 10

func newUpstreamPool(addr string, dialer *net.Dialer, maxIdle int, idleTimeout time.Duration) *upstreamPool {
	p := &upstreamPool{
		addr:        addr,
		dialer:      dialer,
		maxIdle:     maxIdle,
		idleTimeout: idleTimeout,
		done:        make(chan struct{}),
	}
	go p.sweep()
	return p
}

// get returns an idle connection the upstream has kept quiet on, or
// dials a new one. A dial gives up when ctx ends, so a client that leaves
// stops its dial.
func (p *upstreamPool) get(ctx context.Context) (*upstreamConn, error) {
	for {
		c := p.takeIdle()
		if c == nil {
			return p.dial(ctx)
		}
		if !c.heardWhileIdle() {
			return c, nil
		}
		c.Close()
	}
}

// dial opens a new connection.
func (p *upstreamPool) dial(ctx context.Context) (*upstreamConn, error) {
	nc, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	c := &upstreamConn{Conn: nc, bw: bufio.NewWriterSize(nc, upstreamBufferSize), headerLeft: -1}
	c.br = bufio.NewReaderSize(c, upstreamBufferSize)
	c.probe.init(nc)
	return c, nil
}

// takeIdle pops the newest idle connection, nil if there is none.
func (p *upstreamPool) takeIdle() *upstreamConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	c := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return c
}

// put gives back a connection whose last response was read in full and
// that the upstream did not ask to close; it is closed instead if the pool
// is full or closed.
func (p *upstreamPool) put(c *upstreamConn) {
	c.reused = true
	c.idleSince = time.Now()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// sweep closes the connections idle longer than idleTimeout, every half of
// it, until the pool is closed: an upstream that closes idle connections
// itself would otherwise leave them half-closed here until the next busy
// moment.
func (p *upstreamPool) sweep() {
	t := time.NewTicker(p.idleTimeout / 2)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.closeIdle(time.Now().Add(-p.idleTimeout))
		}
	}
}

// closeIdle closes the idle connections put back before cutoff: the
// oldest, at the front.
func (p *upstreamPool) closeIdle(cutoff time.Time) {
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && p.idle[n].idleSince.Before(cutoff) {
		n++
	}
	old := make([]*upstreamConn, n)
	copy(old, p.idle[:n])
	rest := copy(p.idle, p.idle[n:])
	clear(p.idle[rest:])
	p.idle = p.idle[:rest]
	p.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
}

// close closes every idle connection and stops keeping any; connections
// in use are closed or dropped by their requests.
func (p *upstreamPool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	close(p.done)
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// idleCount is the number of idle connections kept.
func (p *upstreamPool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
