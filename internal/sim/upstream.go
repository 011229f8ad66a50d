package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// upstream is the server behind the limiter in an adaptive run: one queue,
// first in first out, served one request at a time, each in 1/C seconds at
// the capacity C of the moment its service starts. A request it cannot
// answer within timeout of its arrival is a timeout: the client gives up
// at arrival plus timeout, and the server, which checks the deadline
// before it starts a request, spends no time on it. So its latency is its
// wait in the queue plus its service, and the queue never holds more than
// timeout's worth of work.
type upstream struct {
	capacity []capacityStep // in time order, the first at 0
	timeout  time.Duration
	free     time.Duration // when the server has done all it has taken on
	// answers and timeouts are the completions not yet delivered, each in
	// time order; together, merged.
	answers, timeouts []completion
}

// completion is one response of the upstream, or a timeout.
type completion struct {
	at      time.Duration // when it completed, into the run
	latency time.Duration
	failed  bool
}

// capacityStep is the upstream's capacity, requests a second, from at on.
type capacityStep struct {
	at   time.Duration
	rate float64
}

// capacityAt is the capacity at t.
func (u *upstream) capacityAt(t time.Duration) float64 {
	return capacityAt(u.capacity, t)
}

func capacityAt(steps []capacityStep, t time.Duration) float64 {
	i, _ := slices.BinarySearchFunc(steps, t, func(s capacityStep, t time.Duration) int {
		if s.at <= t {
			return -1
		}
		return 1
	})
	return steps[max(i-1, 0)].rate
}

// send has a request arrive at at.
func (u *upstream) send(at time.Duration) {
	start := max(at, u.free)
	service := time.Duration(float64(time.Second) / u.capacityAt(start))
	if start+service-at > u.timeout {
		u.timeouts = append(u.timeouts, completion{at: at + u.timeout, latency: u.timeout, failed: true})
		return
	}
	u.free = start + service
	u.answers = append(u.answers, completion{at: u.free, latency: u.free - at})
}

// deliver passes f each completion at or before t, in time order.
func (u *upstream) deliver(t time.Duration, f func(completion)) {
	for {
		var next *[]completion
		switch {
		case len(u.answers) > 0 && u.answers[0].at <= t && (len(u.timeouts) == 0 || u.answers[0].at <= u.timeouts[0].at):
			next = &u.answers
		case len(u.timeouts) > 0 && u.timeouts[0].at <= t:
			next = &u.timeouts
		default:
			return
		}
		f((*next)[0])
		*next = (*next)[1:]
	}
}

// parseCapacity reads --upstream-capacity: the capacity at the start, in
// requests per unit as for --load, then AT=CAPACITY for each change, such
// as 1000,20s=200,40s=1000; AT from 0 (exclusive) to duration, each once.
func parseCapacity(s string, duration time.Duration) ([]capacityStep, error) {
	parts := strings.Split(s, ",")
	const want = "want the capacity at the start and AT=CAPACITY for each change, such as 1000,20s=200,40s=1000"
	var out []capacityStep
	for i, part := range parts {
		at, rate := "0s", part
		if i > 0 {
			var found bool
			if at, rate, found = strings.Cut(part, "="); !found {
				return nil, fmt.Errorf("--upstream-capacity: %s; got %q", want, s)
			}
		}
		var st capacityStep
		var err error
		if st.at, err = time.ParseDuration(strings.TrimSpace(at)); err != nil {
			return nil, fmt.Errorf("--upstream-capacity %s: AT: want a duration such as 20s, got %q", part, at)
		}
		if i > 0 && (st.at <= 0 || st.at > duration) {
			return nil, fmt.Errorf("--upstream-capacity %s: AT must be more than 0 and at most --duration (%v), got %v", part, shortDuration(duration), st.at)
		}
		if st.rate, _, err = parsePerUnit(rate, "a capacity of 0.001 to 1e9 requests per second, such as 200 or 200/s", func(n float64) bool { return n > 0 }); err != nil {
			return nil, fmt.Errorf("--upstream-capacity %s: %w", part, err)
		}
		if !(st.rate >= 0.001 && st.rate <= 1e9) {
			return nil, fmt.Errorf("--upstream-capacity %s: want a capacity of 0.001 to 1e9 requests per second, such as 200 or 200/s, got %s/s", part, strconv.FormatFloat(st.rate, 'g', 4, 64))
		}
		for _, o := range out {
			if o.at == st.at {
				return nil, fmt.Errorf("--upstream-capacity %s: %v is given twice; give one capacity per time", part, st.at)
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b capacityStep) int { return cmp.Compare(a.at, b.at) })
	return out, nil
}
