package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// coldCaches are the caches BenchmarkCheckCold empties before each
// request, by writing a buffer of the given size one byte per 64-byte line.
// l3: 8 MiB, more than any core's L1 and L2 together (1 MiB on Zen 4 and 5,
// 2 MiB on recent Xeons) and less than a server's shared L3: a busy server's
// other work between two requests (the kernel's network stack, the proxy,
// other goroutines) leaves a request about this warm. dram: 128 MiB, more
// than the L3 of most servers: a request that comes after a long pause.
var coldCaches = []struct {
	name string
	size int
}{{"l3", 8 << 20}, {"dram", 128 << 20}}

// BenchmarkCheckCold is BenchmarkCheck with caches emptied before each
// request (see coldCaches): what a request costs the limiter when the code
// and data it touches come from L3 (cache=l3), or from memory (cache=dram).
// BenchmarkCheck repeats one request in a tight loop, where everything stays
// in L1, and so counts instructions but no cache miss. rules=none reaches
// next directly: the harness's own cost, to subtract. Only the request is
// timed (ns/op), not the eviction; run it with a fixed count (-benchtime
// 2000x for l3, 100x for dram), as the eviction takes far longer than the
// request.
func BenchmarkCheckCold(b *testing.B) {
	sets := append([]struct{ name, doc string }{{"rules=none", ""}}, checkRuleSets...)
	for _, bc := range sets {
		for _, cache := range coldCaches {
			b.Run(bc.name+"/cache="+cache.name, func(b *testing.B) {
				checkCold(b, bc.doc, make([]byte, cache.size))
			})
		}
	}
}

// checkCold is one row of BenchmarkCheckCold: rules doc ("" for none),
// caches emptied by writing evict.
func checkCold(b *testing.B, doc string, evict []byte) {
	var h http.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if doc != "" {
		rules, err := httplimit.ParseRules([]byte(doc))
		if err != nil {
			b.Fatal(err)
		}
		l, err := httplimit.New(rules, httplimit.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		h = l.Handler(h)
	}
	r := checkRequest()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r) // the key's buckets exist from here on
	b.ReportAllocs()
	var timed time.Duration
	for b.Loop() {
		clear(w.Header())
		for i := 0; i < len(evict); i += 64 {
			evict[i]++
		}
		start := time.Now()
		h.ServeHTTP(w, r)
		timed += time.Since(start)
	}
	if w.Code != http.StatusOK {
		b.Fatalf("status %d", w.Code)
	}
	b.ReportMetric(float64(timed.Nanoseconds())/float64(b.N), "ns/op")
}
