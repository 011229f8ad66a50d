package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// capServer serves h on a loopback listener capped at max connections,
// whose new connections wait at most wait for a busy one to close.
func capServer(t *testing.T, max int, wait time.Duration, h http.Handler) *connCap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := newConnCap(ln, max, wait)
	srv := &http.Server{Handler: h, ConnState: c.ConnState}
	go srv.Serve(c)
	t.Cleanup(func() { srv.Close() })
	return c
}

// blockingHandler answers /block once release is closed, anything else at
// once; started tells of each request to /block.
func blockingHandler(started chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			started <- struct{}{}
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}
		io.WriteString(w, "ok")
	})
}

// send writes a request for path on a new connection and returns the
// connection, with a 10 s deadline.
func send(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: faucet\r\n\r\n")
	return c
}

// waitQuiet waits until l counts n quiet connections.
func waitQuiet(t *testing.T, l *connCap, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		quiet := l.quiet.Len()
		l.mu.Unlock()
		if quiet == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d quiet connections after 10 s, want %d", quiet, n)
		}
	}
}

func readStatus(c net.Conn) (int, error) {
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The quiet connection evicted is the one quiet longest, whether idle after
// a request or silent since it connected; a busy one is never evicted.
func TestConnCapEvictsTheQuietLongest(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	l := capServer(t, 3, 10*time.Second, blockingHandler(started, release))
	addr := l.Addr().String()
	busy := send(t, addr, "/block")
	<-started
	idle := send(t, addr, "/")
	if code, err := readStatus(idle); err != nil || code != 200 {
		t.Fatalf("first request: %d %v", code, err)
	}
	// The server marks a connection idle after the response has left.
	waitQuiet(t, l, 1)
	silent, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if code, err := readStatus(send(t, addr, "/")); err != nil || code != 200 {
		t.Fatalf("a new connection at the cap: %d %v", code, err)
	}
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the connection idle longest: read %v, want it closed (EOF)", err)
	}
	if _, evicted, _ := l.Stats(); evicted != 1 {
		t.Errorf("evicted %d, want 1", evicted)
	}
	// The silent one is the longest quiet now, then the one just served.
	if code, err := readStatus(send(t, addr, "/")); err != nil || code != 200 {
		t.Fatalf("a second new connection at the cap: %d %v", code, err)
	}
	silent.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the silent connection: read %v, want it closed (EOF)", err)
	}
	release <- struct{}{} // the busy request was kept: it completes
	if code, err := readStatus(busy); err != nil || code != 200 {
		t.Errorf("the busy request: %d %v, want it served", code, err)
	}
}

// With every connection busy, a new one waits for a slot and is served
// when one frees up.
func TestConnCapWaitsWhileAllAreBusy(t *testing.T) {
	started, release := make(chan struct{}, 2), make(chan struct{})
	l := capServer(t, 2, 30*time.Second, blockingHandler(started, release))
	addr := l.Addr().String()
	a, b := send(t, addr, "/block"), send(t, addr, "/block")
	<-started
	<-started
	waiting := send(t, addr, "/")
	waiting.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := waiting.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection over the cap was served while every slot was busy")
	}
	close(release)
	for _, c := range []net.Conn{a, b} {
		readStatus(c)
		c.Close()
	}
	waiting.SetReadDeadline(time.Now().Add(10 * time.Second))
	if code, err := readStatus(waiting); err != nil || code != 200 {
		t.Errorf("the waiting connection once slots freed: %d %v, want served", code, err)
	}
	if _, evicted, rejected := l.Stats(); evicted != 0 || rejected != 0 {
		t.Errorf("evicted %d, rejected %d; want none", evicted, rejected)
	}
}

// A connection that waits longer than its bound is closed unserved and
// counted; the listener goes on accepting.
func TestConnCapRejectsAfterTheWait(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	l := capServer(t, 1, 100*time.Millisecond, blockingHandler(started, release))
	addr := l.Addr().String()
	send(t, addr, "/block")
	<-started
	if _, err := readStatus(send(t, addr, "/")); err == nil || isTimeout(err) {
		t.Errorf("a connection that waited past the bound: %v, want it closed", err)
	}
	if open, _, rejected := l.Stats(); open != 1 || rejected != 1 {
		t.Errorf("open %d, rejected %d; want 1 and 1", open, rejected)
	}
}

// A connection goes quiet after every request and busy with the next one;
// the list of quiet connections keeps its order without allocating.
func TestConnStateOrderAndNoAllocation(t *testing.T) {
	l := newConnCap(nil, 8, time.Second)
	conns := make([]*cappedConn, 4)
	for i := range conns {
		conns[i] = &cappedConn{cap: l}
		l.ConnState(conns[i], http.StateNew)
	}
	l.ConnState(conns[1], http.StateActive) // 0 2 3
	l.ConnState(conns[0], http.StateActive) // 2 3
	l.ConnState(conns[1], http.StateIdle)   // 2 3 1
	l.ConnState(conns[0], http.StateIdle)   // 2 3 1 0
	l.ConnState(conns[3], http.StateActive) // 2 1 0
	var got []*cappedConn
	for c := l.quiet.front; c != nil; c = c.next {
		got = append(got, c)
	}
	if want := []*cappedConn{conns[2], conns[1], conns[0]}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || l.quiet.Len() != 3 || l.quiet.back != conns[0] {
		t.Errorf("quiet list %p (len %d), want %p", got, l.quiet.Len(), want)
	}
	if n := testing.AllocsPerRun(100, func() {
		l.ConnState(conns[2], http.StateActive)
		l.ConnState(conns[2], http.StateIdle)
	}); n != 0 {
		t.Errorf("%v allocations per request, want 0", n)
	}
}
