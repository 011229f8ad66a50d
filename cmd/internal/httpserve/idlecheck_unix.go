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
	found bool                  // what the last peek found
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
		p.found = err != syscall.EAGAIN && err != syscall.EINTR
		return true // never wait
	}
}

// heard reports whether the peer sent anything since the connection was
// last read: bytes, the end of the stream, or a reset. It peeks without
// waiting, so a quiet connection costs one system call.
func (p *idleProbe) heard() bool {
	if p.rc == nil {
		return false
	}
	p.found = false
	if err := p.rc.Read(p.peek); err != nil {
		return true
	}
	return p.found
}
