package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A capacity upstream serves at most C requests a second, first in first
// out: one worker takes each request in turn and spends 1/C s on it, C
// following a schedule. It keeps, per second of the run, what it served
// and the latency its requests saw, queueing included, which GET /stats
// gives as JSON (a []second).

// schedule is a capacity in requests per second and its changes, at
// offsets from the run's start, in order.
type schedule []struct {
	at   time.Duration
	rate float64
}

// parseSchedule parses C[,AT=C]...: "1000,20s=200,50s=1000".
func parseSchedule(s string) (schedule, error) {
	var sc schedule
	for i, f := range strings.Split(s, ",") {
		at, c := "0s", f
		if i > 0 {
			var ok bool
			if at, c, ok = strings.Cut(f, "="); !ok {
				return nil, fmt.Errorf("--schedule %q: %q is not AT=C", s, f)
			}
		}
		d, err := time.ParseDuration(at)
		if err != nil || (i > 0 && d <= sc[i-1].at) {
			return nil, fmt.Errorf("--schedule %q: %q is not a time after the one before it", s, at)
		}
		r, err := strconv.ParseFloat(c, 64)
		if err != nil || r <= 0 || r > 1e6 {
			return nil, fmt.Errorf("--schedule %q: capacity %q must be from 0 to 1e6 requests per second, 0 excluded", s, c)
		}
		sc = append(sc, struct {
			at   time.Duration
			rate float64
		}{d, r})
	}
	return sc, nil
}

// at is the capacity d into the run.
func (sc schedule) at(d time.Duration) float64 {
	if d < 0 {
		return sc[0].rate * warmupFactor
	}
	r := sc[0].rate
	for _, c := range sc {
		if d >= c.at {
			r = c.rate
		}
	}
	return r
}

// warmupFactor is the capacity before the run's start, in units of the
// first: with a load above a bucket's rate, that bucket, full at first,
// passes on its burst on top of its rate until it is empty; the upstream
// takes that in the warm-up without a queue, so that the run starts with
// the bucket empty and the rate at its ceiling.
const warmupFactor = 2

// second is what the upstream did in one second of the run.
type second struct {
	Capacity  float64       `json:"capacity"`  // in force at the second's start
	Served    int           `json:"served"`    // answered in the second
	Abandoned int           `json:"abandoned"` // given up by the proxy in the second, unserved
	Refused   int           `json:"refused"`   // 503, the queue full
	P99       time.Duration `json:"p99"`       // of the served and the abandoned, from arrival
	latencies []time.Duration
}

// capacityUpstream is the upstream's state.
type capacityUpstream struct {
	sched schedule
	start time.Time
	queue chan *job
	taken atomic.Int64 // requests the worker has served or is serving

	mu      sync.Mutex
	seconds []second
}

// job is one request waiting in the queue; done is closed when it is served.
type job struct {
	arrived time.Time
	gone    func() bool // the proxy gave up on it
	done    chan struct{}
}

// record adds a request that left the queue at t, served or abandoned,
// to its second.
func (u *capacityUpstream) record(t time.Time, latency time.Duration, abandoned bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.secondAt(t)
	if s == nil {
		return
	}
	if abandoned {
		s.Abandoned++
	} else {
		s.Served++
	}
	s.latencies = append(s.latencies, latency)
}

// secondAt is t's second; nil before the start. u.mu must be held.
func (u *capacityUpstream) secondAt(t time.Time) *second {
	if t.Before(u.start) {
		return nil
	}
	i := int(t.Sub(u.start) / time.Second)
	for len(u.seconds) <= i {
		u.seconds = append(u.seconds, second{Capacity: u.sched.at(time.Duration(len(u.seconds)) * time.Second)})
	}
	return &u.seconds[i]
}

func (u *capacityUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/stats" {
		u.stats(w)
		return
	}
	j := &job{arrived: time.Now(), gone: func() bool { return r.Context().Err() != nil }, done: make(chan struct{})}
	select {
	case u.queue <- j:
	default:
		u.mu.Lock()
		if s := u.secondAt(j.arrived); s != nil {
			s.Refused++
		}
		u.mu.Unlock()
		http.Error(w, "queue full", http.StatusServiceUnavailable)
		return
	}
	select {
	case <-j.done:
		now := time.Now()
		u.record(now, now.Sub(j.arrived), false)
		io.WriteString(w, "ok")
	case <-r.Context().Done():
		now := time.Now()
		u.record(now, now.Sub(j.arrived), true)
	}
}

// work serves the queue one request at a time, each in 1/C s of a clock
// of its own: a request starts when the one before it is done, or when it
// arrives, whichever is later. The worker sleeps only when that clock is
// ahead of the real one, so a late wakeup delays requests but never
// lowers the capacity. A request the proxy gave up on before its turn
// takes no time.
func (u *capacityUpstream) work() {
	var free time.Time
	for j := range u.queue {
		if j.gone() {
			continue
		}
		u.taken.Add(1)
		if free.Before(j.arrived) {
			free = j.arrived
		}
		free = free.Add(time.Duration(float64(time.Second) / u.sched.at(free.Sub(u.start))))
		if d := time.Until(free); d > 0 {
			time.Sleep(d)
		}
		close(j.done)
	}
}

// stats writes the seconds so far, with their p99s.
func (u *capacityUpstream) stats(w http.ResponseWriter) {
	u.mu.Lock()
	out := make([]second, len(u.seconds))
	for i, s := range u.seconds {
		out[i] = s
		if n := len(s.latencies); n > 0 {
			l := slices.Clone(s.latencies)
			slices.Sort(l)
			// The nearest rank: the smallest latency that 99 % are at
			// or under.
			out[i].P99 = l[(n*99+99)/100-1]
		}
	}
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// capacityMain is httpload capacity.
func capacityMain(args []string) {
	fs := flag.NewFlagSet("httpload capacity", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	sched := fs.String("schedule", "1000,20s=200,50s=1000", "capacity in requests per second, and its changes into the run: `C[,AT=C]...`")
	start := fs.Int64("start", 0, "the run's start, Unix seconds (0: now)")
	queue := fs.Int("queue", 1<<16, "most requests waiting; 503 beyond")
	fs.Parse(args)
	sc, err := parseSchedule(*sched)
	if err != nil || *queue < 1 {
		fmt.Fprintln(os.Stderr, "httpload capacity:", err, "(and --queue at least 1)")
		os.Exit(2)
	}
	u := &capacityUpstream{sched: sc, start: time.Now(), queue: make(chan *job, *queue)}
	if *start > 0 {
		u.start = time.Unix(*start, 0)
	}
	go u.work()
	serve(*listen, u)
}
