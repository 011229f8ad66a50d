package httplimit_test

import (
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// waiters is how many requests BenchmarkDelayWaiting holds at once.
const waiters = 10_000

// waitingRule is BenchmarkDelayWaiting's rule: a key per request, from
// whose bucket a first request takes a token; in delay mode that empties
// it, so that the next waits 25 s, and without, the next is admitted at
// once.
func waitingRule(delay bool) string {
	if delay {
		return `{"rules":[{"name":"per-key","limit_keys":["header:X-Key"],"algorithm_config":{"rps":0.04,"burst":1},"delay":{"max_delay":"30s"}}]}`
	}
	return `{"rules":[{"name":"per-key","limit_keys":["header:X-Key"],"algorithm_config":{"rps":0.04,"burst":2}}]}`
}

// heldUp is what the process holds with waiters requests held up at once:
// the bytes of live heap objects after a collection (HeapAlloc: the heap's
// spans in use vary by more than is measured, with how the two runs
// fragment them), the bytes of stack spans in use, and goroutines.
type heldUp struct {
	heap, stack uint64
	goroutines  int
}

// pipeListener gives an http.Server the server ends of in-memory
// connections: a connection each, without sockets.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// holdUp serves waiters requests at once through net/http, each on a
// connection of its own (net.Pipe), and measures them while all are held
// up: in delay mode, each waits its turn (25 s); without, each is admitted
// and blocks in the next handler, the same connections and goroutines
// with the same requests, keys and buckets, but nothing of delay mode.
// Then the clients leave, and it checks that delay mode gave everything
// back.
func holdUp(b *testing.B, delay bool) heldUp {
	rules, err := httplimit.ParseRules([]byte(waitingRule(delay)))
	if err != nil {
		b.Fatal(err)
	}
	l, err := httplimit.New(rules, httplimit.Options{MaxWaiting: 2 * waiters})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var entered, closed atomic.Int64
	gate := make(chan struct{})
	srv := &http.Server{
		Handler: l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			entered.Add(1)
			<-gate
		})),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				closed.Add(1)
			}
		},
	}
	ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Close()
		if err := <-served; err != http.ErrServerClosed {
			b.Errorf("Serve: %v", err)
		}
	}()

	clients := make([]net.Conn, waiters)
	for i := range clients {
		key := "k" + strconv.Itoa(i)
		// The key's first token, taken without waiting, as both runs make
		// their keys.
		if res := l.Check(req("192.0.2.1:1", "/", "X-Key", key)); !res.Allowed || res.Delay != 0 {
			b.Fatalf("first request of key %d: allowed %v, delay %v; want allowed at once", i, res.Allowed, res.Delay)
		}
		c, s := net.Pipe()
		ln.conns <- s
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: bench\r\nX-Key: " + key + "\r\n\r\n")); err != nil {
			b.Fatal(err)
		}
		clients[i] = c
	}
	held := func() int64 {
		if delay {
			return l.DelayStats().Waiting
		}
		return entered.Load()
	}
	waitFor := func(what string, n func() int64) {
		for deadline := time.Now().Add(time.Minute); n() < waiters; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d requests %s after a minute", n(), waiters, what)
			}
		}
	}
	waitFor("held up", held)
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	got := heldUp{heap: m.HeapAlloc, stack: m.StackInuse, goroutines: runtime.NumGoroutine()}
	if n := held(); n != waiters {
		b.Fatalf("%d requests held up while measured, want %d", n, waiters)
	}

	for _, c := range clients {
		c.Close()
	}
	close(gate)
	waitFor("ended", closed.Load)
	if delay {
		if n := entered.Load(); n != 0 {
			b.Errorf("%d requests reached the next handler before their turn", n)
		}
		if s := l.DelayStats(); s.Waiting != 0 || s.Cancelled != waiters {
			b.Errorf("after the clients left: %+v, want none waiting and %d cancelled", s, waiters)
		}
	} else if n := entered.Load(); n != waiters {
		b.Errorf("%d requests reached the next handler, want %d", n, waiters)
	}
	return got
}

// BenchmarkDelayWaiting is what delay mode holds per waiting request,
// with 10,000 waiting at once, each on a connection of its own: the heap
// and stack bytes, and goroutines, over those of the same requests held
// up in the next handler without delay mode, on the same connections,
// goroutines and buffers. Its time per op is the setup's and is not
// reported; run it with -benchtime 1x.
func BenchmarkDelayWaiting(b *testing.B) {
	var heap, stack, goroutines float64
	for range b.N {
		base := holdUp(b, false)
		delayed := holdUp(b, true)
		heap += float64(delayed.heap) - float64(base.heap)
		stack += float64(delayed.stack) - float64(base.stack)
		goroutines += float64(delayed.goroutines - base.goroutines)
	}
	per := float64(b.N) * waiters
	b.ReportMetric(0, "ns/op")
	b.ReportMetric((heap+stack)/per, "B/waiter")
	b.ReportMetric(heap/per, "heap-B/waiter")
	b.ReportMetric(stack/per, "stack-B/waiter")
	b.ReportMetric(goroutines/per, "goroutines/waiter")
}
