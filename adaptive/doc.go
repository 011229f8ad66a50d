// Package adaptive sets a rate limit from the health of the upstream it
// protects: a Controller lowers the rate when the upstream's latency, at a
// percentile over a recent window, passes a target or its share of
// failures passes a bound, and raises it step by step while the upstream
// is healthy, always between a floor and a ceiling. The caller applies the
// rate to its limiter (engine.Engine.SetLimitAt), which keeps every
// bucket's tokens across the change.
//
//	c, err := adaptive.New(adaptive.Config{Floor: 50, Ceiling: 1000, LatencyTarget: 50 * time.Millisecond})
//	...
//	// For each response of the upstream:
//	c.Observe(time.Now(), latency, status >= 500 || timedOut)
//	// Every Interval (1 s by default):
//	if rate, changed := c.Step(time.Now()); changed {
//		e.SetLimit(engine.Limit(rate))
//	}
//
// # The rules
//
// Each Step judges the observations since the last steps, up to Window
// (five steps by default). The upstream is unhealthy if its latency at
// Percentile (99 % by default) is above LatencyTarget, or more than
// ErrorRate of the responses failed (5 % by default). Then the rate drops
// multiplicatively, to Decrease (0.7 by default) times what the upstream
// served successfully in the last step, or times the rate if that is
// lower; the upstream's own throughput is the better measure of what it
// can take when it is overloaded, as TCP's congestion control halves the
// data actually in flight rather than its window. While healthy, the rate
// grows additively, by Increase a step (Ceiling/50 by default). This is
// AIMD, additive increase and multiplicative decrease.
//
// Two rules keep one overload from driving the rate to the floor. A
// verdict of unhealthy spends the observations it judged: the next step
// judges only what came after it, or the same bad window would decrease
// the rate at every step until it has passed (an observation dated before
// the verdict is not judged either, though what the upstream served counts
// it). And an unhealthy upstream
// that served more than the rate in the last step is draining the queue
// that the overload built up, which takes a while after the rate is below
// its capacity: the rate holds until the latency is back under the
// target. With fewer than MinSamples observations to judge, the rate holds
// too: there is no evidence either way.
//
// # Why AIMD
//
// The other well-known family adjusts a concurrency limit from the
// gradient of latency, as Netflix's concurrency-limits does: the ratio of
// the shortest round-trip time seen, taken as the unloaded baseline, to
// the current one scales the limit, plus a queue allowance. AIMD suits
// this package better: it sets a rate, a limit on requests per second,
// not on requests in flight; it needs no baseline, which a proxy in front
// of many routes, and an upstream whose unloaded latency changes with its
// own load and deploys, does not have; it is bounded by construction
// between Floor and Ceiling; and each step is one of three plain moves,
// easy to predict and to reason about. Its cost is a sawtooth: once at
// the upstream's capacity, the rate climbs past it by at most Increase,
// drops to Decrease times it and climbs again, averaging about 85 % of the
// capacity with the defaults.
//
// # What to observe
//
// Observe only what the upstream did. A failure is the upstream's own: a
// 5xx it sent, or a timeout waiting for it. A 4xx is the client's doing,
// and must be observed as a success (or not at all); a client that
// disconnects is not observed at all, as its latency measures nothing of
// the upstream. Otherwise a client could steer the rate down for everyone,
// by sending requests the upstream refuses or by hanging up early. Latency
// is the time the upstream took to answer, a timeout's being the timeout.
//
// # Memory and concurrency
//
// Latencies are counted in a fixed histogram of log-scale buckets (about
// 15 % wide, from 100 µs to 1 minute), one for each of the steps in Window:
// memory is fixed, about 800 bytes a step, whatever the traffic. Observe
// takes no lock and allocates nothing (atomic adds on the current step's
// histogram); Step takes a mutex and reads the histograms with atomic
// loads, so observations keep coming while it runs. Whether a latency is
// above the target is counted exactly, apart from the histogram; the
// percentile that Stats reports is read from it, at most 15 % high.
package adaptive
