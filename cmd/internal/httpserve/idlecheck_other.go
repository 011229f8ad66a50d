//go:build !unix

package httpserve

import "net"

// idleProbe has nothing to peek with where sockets cannot be read without
// waiting through the standard library.
type idleProbe struct{}

func (*idleProbe) init(net.Conn) {}

// heardWhileIdle reports whether the upstream sent bytes nobody asked for
// on an idle connection, as far as this system lets the proxy see without
// a read: those already buffered.
func (c *upstreamConn) heardWhileIdle() bool { return c.br.Buffered() > 0 }
