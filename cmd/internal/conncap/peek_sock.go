//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package conncap

import (
	"net"
	"syscall"
)

// pending reports whether bytes from the peer wait in c's socket, unread:
// a request that arrived on a connection the server has not read yet.
// It never blocks.
func pending(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var n int
	var b [1]byte
	// Control, not Read: Read would wait for the server's own read of the
	// connection to return. The peek does not block, so it may run beside.
	rc.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return n > 0
}
