//go:build unix

package httpserve

import "syscall"

// heardWhileIdle reports whether the upstream sent anything on an idle
// connection: bytes nobody asked for, which would be read as the answer
// to the next request, or the end of the stream. It peeks without
// waiting, so a quiet connection costs one system call.
func (c *upstreamConn) heardWhileIdle() bool {
	if c.br.Buffered() > 0 {
		return true
	}
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	heard := false
	var one [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch rerr {
		case nil: // a byte, or 0 at the end of the stream
			heard = true
		case syscall.EAGAIN, syscall.EINTR:
		default:
			heard = true
		}
		return true
	})
	return heard || err != nil
}
