// Package conncap caps the connections a listener holds open, so that idle
// or silent connections cannot use up the process's file descriptors, and
// a flood of them cannot lock real clients out.
//
// A connection is busy while it carries work and quiet otherwise. An HTTP/1
// connection is busy from the first byte of a request, whether the server
// has read it yet or it still waits in the socket, until the server reports
// it idle (see [Listener.ConnState]); a connection of calls (gRPC) is busy
// while a call begun with [Listener.Begin] is in flight. At the cap a new
// connection takes the place of the one quiet longest: at once if that
// one has carried a request, and otherwise once it has been open for a
// grace period, so a client that just connected has time to send its
// first. An idle or read-header timeout would close it later anyway, and a
// client that reuses it sees a closed keep-alive connection, which HTTP
// and gRPC clients retry. A request in flight, or one
// that has arrived and not been read yet, is never dropped to make room.
//
// When no connection may be evicted, new connections wait side by side, at
// most [MaxWaiting] of them, each up to a bound, and take a slot as soon as
// a connection closes or goes quiet. A connection that finds no place is
// refused: on an HTTP listener with a 503 response carrying Retry-After and
// Connection: close once its request header has arrived, reading at most
// [RefuseBytes] of it for at most [RefuseTime], with at most [MaxRefusing]
// refusals in progress (beyond that it is closed), so that refusing costs
// the server less than the client; on other listeners it is closed.
//
// golang.org/x/net/netutil.LimitListener caps connections too, but only by
// waiting, so idle connections at the cap would lock new clients out until
// the idle timeout.
package conncap
