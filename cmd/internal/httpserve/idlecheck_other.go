//go:build !unix

package httpserve

import "net"

// idleProbe has nothing to peek with where sockets cannot be read without
// waiting through the standard library.
type idleProbe struct{}

func (*idleProbe) init(net.Conn) {}

// heard reports nothing: only the bytes already buffered tell.
func (*idleProbe) heard() bool { return false }
