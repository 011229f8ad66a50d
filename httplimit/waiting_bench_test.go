package httplimit_test

import (
	"context"
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

// waitingRule is BenchmarkDelayWaiting's rule: a key per request, whose
// bucket a first request empties, so that the next waits 25 s, in delay
// mode, or is admitted at once without.
func waitingRule(delay bool) string {
	d := ""
	if delay {
		d = `,"delay":{"max_delay":"30s"}`
	}
	return `{"rules":[{"name":"per-key","limit_keys":["header:X-Key"],"algorithm_config":{"rps":0.04,"burst":1}` + d + `}]}`
}

// heldUp is what the process holds with waiters requests held up at once:
// heap and stack bytes in use after a collection, and goroutines.
type heldUp struct {
	heap, stack uint64
	goroutines  int
}

// holdUp serves waiters requests at once, each on its own goroutine as
// net/http gives each connection one, and measures them while all are
// held up: in delay mode, each waits its turn (25 s); without, each is
// admitted and blocks in the next handler, the same goroutines blocked
// with the same requests, keys and buckets, but nothing of delay mode.
// Then it ends them (the clients leave, or the handler returns) and
// checks that delay mode gave everything back.
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
	var entered atomic.Int64
	gate := make(chan struct{})
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered.Add(1)
		<-gate
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reqs := make([]*http.Request, waiters)
	for i := range reqs {
		reqs[i] = req("192.0.2.1:1", "/", "X-Key", "k"+strconv.Itoa(i)).WithContext(ctx)
		if delay { // the bucket's one token, taken without waiting
			if res := l.Check(reqs[i]); !res.Allowed || res.Delay != 0 {
				b.Fatalf("first request of key %d: allowed %v, delay %v; want allowed at once", i, res.Allowed, res.Delay)
			}
		}
	}
	codes := make([]int, waiters)
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() {
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, reqs[i])
			codes[i] = w.code
		})
	}
	held := func() int64 {
		if delay {
			return l.Waiting()
		}
		return entered.Load()
	}
	for deadline := time.Now().Add(time.Minute); held() < waiters; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d requests held up after a minute", held(), waiters)
		}
	}
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	got := heldUp{heap: m.HeapInuse, stack: m.StackInuse, goroutines: runtime.NumGoroutine()}
	if n := held(); n != waiters {
		b.Fatalf("%d requests held up while measured, want %d", n, waiters)
	}
	// A server's connections keep their requests; without delay mode,
	// nothing here would once the next handler has them.
	runtime.KeepAlive(reqs)

	cancel()
	close(gate)
	wg.Wait()
	want := 0 // admitted: the next handler writes no status
	if delay {
		want = http.StatusServiceUnavailable
		if n := entered.Load(); n != 0 {
			b.Errorf("%d requests reached the next handler before their turn", n)
		}
		if s := l.DelayStats(); s.Waiting != 0 || s.Cancelled != waiters {
			b.Errorf("after the clients left: %+v, want none waiting and %d cancelled", s, waiters)
		}
	}
	for i, c := range codes {
		if c != want {
			b.Fatalf("request %d: status %d, want %d", i, c, want)
		}
	}
	return got
}

// BenchmarkDelayWaiting is what delay mode holds per waiting request,
// with 10,000 waiting at once: the heap and stack bytes, and goroutines,
// over those of the same requests held up in the next handler without
// delay mode (whose goroutines net/http has anyway, one per connection).
// Its time per op is the setup's and is not reported; run it -benchtime
// 1x.
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
