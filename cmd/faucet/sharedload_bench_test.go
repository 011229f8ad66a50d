package main

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

// sharedSpan is the length of each BenchmarkSharedHotKey run; a shorter
// one is a smoke test, not the documented figure.
var sharedSpan = flag.Duration("sharedload-span", 8*time.Second, "length of each BenchmarkSharedHotKey run")

// BenchmarkSharedHotKey is the documented figure of a limit shared under a
// hot key: four faucet serve instances on one store, sixteen clients each
// checking one API key as fast as they can, 100/s with burst 100, for
// -sharedload-span (8 s), per store and mode. Each iteration is a whole run
// on a key of its own (use -benchtime 1x and -count for repeats). It
// reports, per run: admitted; bound, burst + rate × span with the span from
// the first send to the last reply; pct-of-bound, admitted as a share of
// it (at most 100); pct-of-rate, admitted as a share of rate × span (the
// target is at least 95); store-errors, the instances' failed store calls;
// and checks/s, the checks answered.
func BenchmarkSharedHotKey(b *testing.B) {
	for _, c := range sharedCases {
		b.Run(c.name(), func(b *testing.B) {
			st := c.start(b)
			l := hotLoad{instances: 4, clients: 16, limit: 100, burst: 100, span: *sharedSpan,
				maxChecks: 1 << 20, serveArgs: st.args}
			var admitted, bound, ofBound, ofRate, storeErrors, cps float64
			for i := range b.N {
				l.key = fmt.Sprintf("hot-%d", i)
				res := runHotLoad(b, l)
				bd := res.bound(l)
				admitted += float64(res.admitted)
				bound += bd
				ofBound += 100 * float64(res.admitted) / bd
				ofRate += 100 * float64(res.admitted) / (l.limit * res.span().Seconds())
				storeErrors += res.storeErrors
				cps += res.checksPerSecond()
				b.Logf("%v; bound %.0f", res, bd)
			}
			n := float64(b.N)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(admitted/n, "admitted")
			b.ReportMetric(bound/n, "bound")
			b.ReportMetric(ofBound/n, "pct-of-bound")
			b.ReportMetric(ofRate/n, "pct-of-rate")
			b.ReportMetric(storeErrors/n, "store-errors")
			b.ReportMetric(cps/n, "checks/s")
		})
	}
}
