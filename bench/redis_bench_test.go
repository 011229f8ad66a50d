package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// redisCallers are the numbers of concurrent callers each Redis
// implementation is measured at.
var redisCallers = []int{1, 16, 64}

// redisKeys is how many distinct keys the Redis benchmarks spread their
// checks over: enough that no single key is hot, few enough that every
// key's bucket stays in Redis for the whole run.
const redisKeys = 10_000

// redisLimit never binds at the rates one machine reaches (1e6 tokens per
// second and per key, bursts of 1e6), so no implementation is fast by
// denying; admit/op shows that every check was admitted.
var redisLimit = limit{rate: 1e6, burst: 1e6}

// redisCheck takes one token for key through Redis; err is a store failure.
type redisCheck func(ctx context.Context, key string) (allowed bool, err error)

// redisImpl is one way to check a limit in Redis.
type redisImpl struct {
	// name is the benchmark label; see impl.name.
	name string
	// new connects to the server at addr for callers concurrent callers.
	new func(addr string, lim limit, callers int) (check redisCheck, closeFn func(), err error)
}

// redisImpls are the implementations, in the order of the results: faucet's,
// then the peers, then the no-op ceiling.
var redisImpls = []redisImpl{faucetRedisImpl, faucetGoRedisImpl, redisRateImpl, noopRueidisImpl}

// BenchmarkRedis checks a limit in one local Redis from 1, 16 and 64
// concurrent callers, with every implementation in the same process against
// the same server, which is emptied (FLUSHALL) before each. Each caller
// walks the 1e4 keys in a random order of its own and times every call into
// an HDR histogram: checks/s is the throughput of all callers together,
// p50-ns and p99-ns the latency of single calls as a caller sees it
// (queueing in the client included), admit/op the share admitted, and
// server-ns/op the time the server spent in the script per check (from INFO
// commandstats): checks/s times server-ns/op is the share of the server's
// one thread the checks kept busy. scripts/op is the scripts the server ran
// per check: 1 for a limiter that sends each check alone, less for faucet's
// batches.
func BenchmarkRedis(b *testing.B) {
	keys := keys13(redisKeys)
	seq := uniformSeq(redisKeys)
	for _, im := range redisImpls {
		for _, callers := range redisCallers {
			b.Run(fmt.Sprintf("impl=%s/callers=%d", im.name, callers), func(b *testing.B) {
				benchRedisImpl(b, im, redisLimit, callers, keys, seq)
			})
		}
	}
}

// benchRedisImpl measures im at lim from callers callers on an emptied
// server.
func benchRedisImpl(b *testing.B, im redisImpl, lim limit, callers int, keys []string, seq []int32) {
	addr := redisAddr(b)
	if _, err := redistest.Do(addr, "FLUSHALL"); err != nil {
		b.Fatal(err)
	}
	check, closeFn, err := im.new(addr, lim, callers)
	if err != nil {
		b.Fatal(err)
	}
	defer closeFn()
	runRedis(b, addr, check, callers, keys, seq)
}

// runRedis makes b.N checks from callers goroutines and reports the
// metrics. Setup (connecting, loading the script on a first call) happens
// before the timer starts.
func runRedis(b *testing.B, addr string, check redisCheck, callers int, keys []string, seq []int32) {
	ctx := context.Background()
	if _, err := check(ctx, "warm-up"); err != nil {
		b.Fatal(err)
	}
	if _, err := redistest.Do(addr, "CONFIG", "RESETSTAT"); err != nil {
		b.Fatal(err)
	}
	elapsed, admitted, all := runCallers(b, check, callers, keys, seq)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "checks/s")
	b.ReportMetric(float64(all.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(all.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(admitted)/float64(b.N), "admit/op")
	usec, calls, err := redisScriptTime(addr)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(usec)*1e3/float64(b.N), "server-ns/op")
	b.ReportMetric(float64(calls)/float64(b.N), "scripts/op")
}

// runCallers makes b.N checks from callers goroutines and times them: the
// checks' span (the timer runs for it alone), how many were admitted, and
// every call's latency. Each caller walks seq from a point of its own. A
// failed check fails the benchmark.
func runCallers(b *testing.B, check redisCheck, callers int, keys []string, seq []int32) (elapsed time.Duration, admitted int64, latency *hdrhistogram.Histogram) {
	var (
		ctx      = context.Background()
		next     atomic.Int64 // checks handed out so far
		nAdmit   atomic.Int64
		failures atomic.Int64
		mu       sync.Mutex // guards all and firstErr
		firstErr error
		all      = hdrhistogram.New(1, int64(time.Minute), 3)
		start    = make(chan struct{})
		wg       sync.WaitGroup
	)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hdrhistogram.New(1, int64(time.Minute), 3)
			// Callers start at scattered points of the sequence, so they do
			// not ask for the same keys in lock step.
			pos := (c * len(seq) / callers) % len(seq)
			var ok int64
			<-start
			for next.Add(1) <= int64(b.N) {
				k := keys[seq[pos]]
				if pos++; pos == len(seq) {
					pos = 0
				}
				t0 := time.Now()
				allowed, err := check(ctx, k)
				h.RecordValue(int64(time.Since(t0)))
				if err != nil && failures.Add(1) == 1 {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
				if allowed {
					ok++
				}
			}
			nAdmit.Add(ok)
			mu.Lock()
			all.Merge(h)
			mu.Unlock()
		}()
	}
	runtime.GC()
	b.ResetTimer()
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed = time.Since(t0)
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d of %d checks failed; first: %v", n, b.N, firstErr)
	}
	return elapsed, nAdmit.Load(), all
}
