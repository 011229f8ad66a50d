package conncap

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// capListener caps a loopback listener as cfg says.
func capListener(t *testing.T, cfg Config) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// accept accepts the next connection of l, within 10 s.
func accept(t *testing.T, l *Listener) *Conn {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() { c, err := l.Accept(); ch <- result{c, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Cleanup(func() { r.c.Close() })
		return r.c.(*Conn)
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted in 10 s")
	}
	return nil
}

// closedBy tells whether the server closed c (within 10 s), reading what
// it sent first.
func closedBy(c net.Conn) (string, bool) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err == nil || !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// capServer serves h on a loopback listener capped at max connections,
// whose new connections wait at most wait for a busy one to close.
func capServer(t *testing.T, max int, wait time.Duration, h http.Handler) *Listener {
	t.Helper()
	c := capListener(t, Config{Max: max, Wait: wait, Grace: time.Millisecond})
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
func waitQuiet(t *testing.T, l *Listener, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		quiet := l.quiet.n
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
	time.Sleep(20 * time.Millisecond) // past the silent one's grace
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
	// Answered, a and b go idle, and the waiting one may take the place
	// of one of them.
	if _, _, rejected := l.Stats(); rejected != 0 {
		t.Errorf("rejected %d, want none", rejected)
	}
}

// A connection that waits longer than its bound is answered 503 and
// counted; the listener goes on accepting.
func TestConnCapRejectsAfterTheWait(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	l := capServer(t, 1, 100*time.Millisecond, blockingHandler(started, release))
	addr := l.Addr().String()
	send(t, addr, "/block")
	<-started
	if code, err := readStatus(send(t, addr, "/")); code != 503 {
		t.Errorf("a connection that waited past the bound: %d %v, want 503", code, err)
	}
	if open, _, rejected := l.Stats(); open != 1 || rejected != 1 {
		t.Errorf("open %d, rejected %d; want 1 and 1", open, rejected)
	}
}

// A connection goes quiet after every request and busy with the next one;
// the list of quiet connections keeps its order without allocating.
func TestConnStateOrderAndNoAllocation(t *testing.T) {
	l, _ := New(nil, Config{Max: 8, Wait: time.Second})
	conns := make([]*Conn, 4)
	for i := range conns {
		conns[i] = &Conn{l: l}
		l.enter(conns[i])
		l.ConnState(conns[i], http.StateNew)
	}
	l.ConnState(conns[1], http.StateActive) // 0 2 3
	l.ConnState(conns[0], http.StateActive) // 2 3
	l.ConnState(conns[1], http.StateIdle)   // 2 3 1
	l.ConnState(conns[0], http.StateIdle)   // 2 3 1 0
	l.ConnState(conns[3], http.StateActive) // 2 1 0
	var got []*Conn
	for c := l.quiet.front; c != nil; c = c.next {
		got = append(got, c)
	}
	if want := []*Conn{conns[2], conns[1], conns[0]}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || l.quiet.n != 3 || l.quiet.back != conns[0] {
		t.Errorf("quiet list %p (len %d), want %p", got, l.quiet.n, want)
	}
	if n := testing.AllocsPerRun(100, func() {
		l.ConnState(conns[2], http.StateActive)
		l.ConnState(conns[2], http.StateIdle)
	}); n != 0 {
		t.Errorf("%v allocations per request, want 0", n)
	}
}

// A connection whose request waits in its socket, not read yet by the
// server, is busy: at the cap the silent one is evicted instead, and when
// only busy ones are left a new connection waits, then is refused with 503.
func TestEvictsNoRequestWaitingToBeRead(t *testing.T) {
	l := capListener(t, Config{Max: 2, Wait: 300 * time.Millisecond, Grace: 50 * time.Millisecond})
	addr := l.Addr().String()
	unread := send(t, addr, "/")
	accept(t, l)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accept(t, l)
	time.Sleep(100 * time.Millisecond) // past the grace
	third := send(t, addr, "/")
	accept(t, l)
	if _, closed := closedBy(silent); !closed {
		t.Error("the silent connection was kept")
	}
	unread.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := unread.Read(make([]byte, 1)); !isTimeout(err) {
		t.Errorf("the connection whose request was not read yet: %v, want it kept", err)
	}
	// Both holding slots now have requests waiting: the next is refused.
	got, _ := closedBy(send(t, addr, "/"))
	if !strings.HasPrefix(got, "HTTP/1.1 503 ") || !strings.Contains(got, "\r\nRetry-After: 1\r\n") || !strings.Contains(got, "\r\nConnection: close\r\n") {
		t.Errorf("refused at the cap, got %q, want a 503 with Retry-After and Connection: close", got)
	}
	if open, evicted, rejected := l.Stats(); open != 2 || evicted != 1 || rejected != 1 {
		t.Errorf("open %d, evicted %d, rejected %d; want 2, 1, 1", open, evicted, rejected)
	}
	_ = third
}

// A connection from which the server has read bytes of a request is busy,
// though the server has not reported so (it does once the header is whole).
func TestFirstByteReadIsBusy(t *testing.T) {
	l := capListener(t, Config{Max: 1, Wait: 200 * time.Millisecond, Grace: time.Millisecond})
	addr := l.Addr().String()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHo")
	sc := accept(t, l)
	if _, err := sc.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	refused := send(t, addr, "/")
	if got, _ := closedBy(refused); !strings.HasPrefix(got, "HTTP/1.1 503 ") {
		t.Errorf("new connection at the cap: %q, want 503", got)
	}
	if _, evicted, _ := l.Stats(); evicted != 0 {
		t.Errorf("evicted %d connections with a request begun, want 0", evicted)
	}
	// Answered and idle, the same connection may be evicted.
	l.ConnState(sc, http.StateActive)
	l.ConnState(sc, http.StateIdle)
	time.Sleep(10 * time.Millisecond)
	send(t, addr, "/")
	accept(t, l)
	if _, closed := closedBy(c); !closed {
		t.Error("the idle connection was not evicted")
	}
}

// New connections at the cap wait side by side, at most MaxWaiting; the
// ones beyond are refused at once; a slot that frees up goes to a waiting
// one at once.
func TestWaitersSideBySide(t *testing.T) {
	l := capListener(t, Config{Max: 1, Wait: 10 * time.Second, Grace: time.Hour})
	addr := l.Addr().String()
	first := send(t, addr, "/")
	held := accept(t, l)
	conns := make([]net.Conn, MaxWaiting+4)
	for i := range conns {
		conns[i] = send(t, addr, "/")
	}
	var wg sync.WaitGroup
	refused := make(chan string, len(conns))
	for _, c := range conns[:] {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			b, _ := io.ReadAll(c)
			refused <- string(b)
		})
	}
	wg.Wait()
	close(refused)
	n := 0
	for got := range refused {
		if strings.HasPrefix(got, "HTTP/1.1 503 ") {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d refused at once, want 4 (beyond %d waiting)", n, MaxWaiting)
	}
	start := time.Now()
	held.Close()
	accept(t, l)
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("a waiting connection took %v to get the freed slot", waited)
	}
	_ = first
}

// On a listener of calls, a connection with a call in flight is busy; with
// none, once past the grace, it may be evicted, and a refused one is closed.
func TestCallsBusyWhileInFlight(t *testing.T) {
	l := capListener(t, Config{Max: 1, Wait: 100 * time.Millisecond, Grace: time.Millisecond, Calls: true})
	addr := l.Addr().String()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := accept(t, l)
	call := l.Begin(sc.RemoteAddr())
	if call == nil {
		t.Fatal("Begin: no connection for the address")
	}
	time.Sleep(10 * time.Millisecond)
	d, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if got, closed := closedBy(d); !closed || got != "" {
		t.Errorf("a refused connection: read %q, closed %v; want closed without a byte", got, closed)
	}
	call.End()
	time.Sleep(10 * time.Millisecond)
	e, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	accept(t, l)
	if _, closed := closedBy(c); !closed {
		t.Error("the connection without a call was not evicted")
	}
	if open, evicted, rejected := l.Stats(); open != 1 || evicted != 1 || rejected != 1 {
		t.Errorf("open %d, evicted %d, rejected %d; want 1, 1, 1", open, evicted, rejected)
	}
}

// The grace spares only a connection that never carried a request: one
// quiet after a call is evicted at once, however recent its call.
func TestGraceOnlyBeforeTheFirstRequest(t *testing.T) {
	l := capListener(t, Config{Max: 1, Wait: 100 * time.Millisecond, Grace: time.Hour, Calls: true})
	addr := l.Addr().String()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := accept(t, l)
	d, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, closed := closedBy(d); !closed {
		t.Fatal("a connection at the cap was not refused")
	}
	if open, evicted, _ := l.Stats(); open != 1 || evicted != 0 {
		t.Fatalf("open %d, evicted %d: a connection within its grace was evicted", open, evicted)
	}
	l.Begin(sc.RemoteAddr()).End()
	e, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	accept(t, l)
	if _, closed := closedBy(c); !closed {
		t.Error("a connection quiet after a call was not evicted within its grace")
	}
	if _, evicted, _ := l.Stats(); evicted != 1 {
		t.Errorf("evicted %d, want 1", evicted)
	}
}

// A refusal reads at most RefuseBytes of a request, and answers only once
// its header is whole.
func TestRefusalIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name, send string
		answered   bool
	}{
		{"whole header", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
		{"bare LFs", "GET / HTTP/1.0\nHost: a\n\n", true},
		{"header never ends", "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", RefuseBytes+1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, server := net.Pipe()
			defer client.Close()
			done := make(chan struct{})
			go func() { refuse503(server); close(done) }()
			go io.WriteString(client, tc.send)
			b, _ := io.ReadAll(client)
			<-done
			if got := strings.HasPrefix(string(b), "HTTP/1.1 503 "); got != tc.answered {
				t.Errorf("answered %v (%q), want %v", got, b, tc.answered)
			}
		})
	}
}

// A connection the handler hijacked (an upgraded tunnel) keeps its slot,
// never quiet, until the handler closes it.
func TestHijackedKeepsItsSlot(t *testing.T) {
	hijacked := make(chan net.Conn, 1)
	l := capServer(t, 1, 200*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n")
		hijacked <- c
	}))
	addr := l.Addr().String()
	tunnel := send(t, addr, "/")
	if code, err := readStatus(tunnel); code != 101 {
		t.Fatalf("upgrade: %d %v", code, err)
	}
	c := <-hijacked
	time.Sleep(20 * time.Millisecond)
	if code, _ := readStatus(send(t, addr, "/")); code != 503 {
		t.Errorf("a new connection beside the tunnel at the cap: %d, want 503", code)
	}
	if open, evicted, _ := l.Stats(); open != 1 || evicted != 0 {
		t.Errorf("open %d, evicted %d with the tunnel open; want 1, 0", open, evicted)
	}
	c.Close()
	if code, err := readStatus(send(t, addr, "/")); code != 101 {
		t.Errorf("a new connection once the tunnel closed: %d %v, want served", code, err)
	}
	(<-hijacked).Close()
}
