package pgaudit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgaudit"
)

// deniedHandler is a Middleware, reporting to onDeny, whose one rule denies
// every request after the first, and a request to send it.
func deniedHandler(b *testing.B, onDeny func(httplimit.Denial)) (http.Handler, *http.Request) {
	rules := []httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: 1e-6, Burst: 1}}
	lim, err := httplimit.New(rules, httplimit.Options{OnDeny: onDeny})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lim.Close() })
	h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "/api/orders", nil)
	r.RemoteAddr = "2001:db8::1:2:3:4:5000"
	h.ServeHTTP(httptest.NewRecorder(), r) // the one token
	return h, r
}

// auditCase is a benchmark's auditing: off, or a Writer to PostgreSQL.
func auditCase(b *testing.B, on bool) (func(httplimit.Denial), *pgaudit.Writer) {
	if !on {
		return nil, nil
	}
	w, err := pgaudit.NewWriter(installed(b, pgaudit.Schema{}), pgaudit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close(context.Background()) })
	return w.Deny, w
}

// BenchmarkDenied is the cost of a denied request through the middleware,
// auditing off and on. Denials come as fast as one goroutine can make them,
// far beyond what one PostgreSQL connection writes, so with auditing on most
// are dropped (drops/op): the cost is the queue's, full or not, not the
// database's.
func BenchmarkDenied(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "audit=off", true: "audit=on"}[on], func(b *testing.B) {
			onDeny, w := auditCase(b, on)
			h, r := deniedHandler(b, onDeny)
			rw := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				clear(rw.Header())
				h.ServeHTTP(rw, r)
			}
			if rw.Code != http.StatusTooManyRequests {
				b.Fatalf("status %d, want 429", rw.Code)
			}
			if w != nil {
				b.ReportMetric(float64(w.Stats().Dropped)/float64(b.N), "drops/op")
			}
		})
	}
}

// BenchmarkDeniedAt20k paces denied requests at 20,000 a second (run it with
// -benchtime=40000x: two seconds) and reports the process's CPU time per
// denial, the writer's goroutine and the garbage collector included, up to
// when every denial is written; PostgreSQL's own CPU is not counted. The
// pacing's sleeps are in both cases, so the difference is auditing's.
func BenchmarkDeniedAt20k(b *testing.B) {
	const rate = 20_000
	const chunk = 20 // denials sent back to back, once a millisecond
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "audit=off", true: "audit=on"}[on], func(b *testing.B) {
			onDeny, w := auditCase(b, on)
			h, r := deniedHandler(b, onDeny)
			rw := httptest.NewRecorder()
			if b.N > 10*rate {
				b.Fatalf("%d denials: more than ten seconds at %d a second", b.N, rate)
			}
			cpu0 := cpuTime()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if i%chunk == 0 {
					time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / rate)))
				}
				clear(rw.Header())
				h.ServeHTTP(rw, r)
			}
			sent := time.Since(start)
			if w != nil {
				deadline := time.Now().Add(30 * time.Second)
				for w.Stats().Queued > 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/denial")
			b.ReportMetric(float64(b.N)/sent.Seconds(), "denials/s")
			if w != nil {
				s := w.Stats()
				b.ReportMetric(float64(s.Dropped)/float64(b.N), "drops/op")
				if s.Queued > 0 {
					b.Fatalf("%d denials still queued 30 s after the last", s.Queued)
				}
			}
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
