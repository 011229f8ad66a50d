//go:build !unix

package httpserve

// heardWhileIdle reports whether the upstream sent bytes nobody asked for
// on an idle connection, as far as this system lets the proxy see without
// a read: those already buffered.
func (c *upstreamConn) heardWhileIdle() bool { return c.br.Buffered() > 0 }
