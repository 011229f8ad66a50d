//go:build unix

package httpserve

import (
	"net"
	"syscall"
)

// idleProbe peeks at an idle connection's socket without waiting. Its
// parts are made once per connection, so that a peek allocates nothing.
type idleProbe struct {
	rc    syscall.RawConn
	peek  func(fd uintptr) bool // the callback of rc.Read
	heard bool                  // what the last peek found
}

func (p *idleProbe) init(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	var one [1]byte
	p.rc = rc
	p.peek = func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// A byte, 0 at the end of the stream, or a reset: all heard.
		p.heard = err != syscall.EAGAIN && err != syscall.EINTR
		return true // never wait
	}
}

// heardWhileIdle reports whether the upstream sent anything on an idle
// connection: bytes nobody asked for, which would be read as the answer
// to the next request, or the end of the stream. It peeks without
// waiting, so a quiet connection costs one system call.
func (c *upstreamConn) heardWhileIdle() bool {
	if c.br.Buffered() > 0 {
		return true
	}
	if c.probe.rc == nil {
		return false
	}
	c.probe.heard = false
	if err := c.probe.rc.Read(c.probe.peek); err != nil {
		return true
	}
	return c.probe.heard
}
