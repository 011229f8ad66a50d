package httplimit

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/adaptive"
	"github.com/faucetgo/faucet/engine"
)

// Adaptive lets a rule's rate follow the health of what it protects (see
// package adaptive): it drops when the responses' latency at Percentile
// passes LatencyTarget, or their share of server errors passes ErrorRate,
// and climbs back while they are healthy, between Floor and the rule's
// own rate, its ceiling. Only a rule with one token bucket and the
// "global" key can adapt: the controller weighs the rate against what the
// upstream served, which only the upstream's whole admitted rate can be
// weighed against.
type Adaptive struct {
	// Floor is the least the rate falls to, tokens per second: more than
	// 0 and at most the rule's rate.
	Floor float64
	// LatencyTarget is the latency above which, at Percentile, the
	// upstream is unhealthy: up to 1 minute. The latency is the time from
	// when the request is passed on, or its body was read whole if that
	// came later (the client's upload is not the upstream's time), until
	// its response's header is written.
	LatencyTarget time.Duration
	// Percentile (0: 0.99), ErrorRate (0: 0.05), Decrease (0: 0.7) and
	// Increase (0: the rule's rate / 50) are adaptive.Config's.
	Percentile, ErrorRate, Decrease, Increase float64
}

// adaptiveFields are the rules' names of adaptive.Config's fields.
var adaptiveFields = map[string]string{"Floor": "adaptive.floor", "Ceiling": "algorithm_config.tokens_per_second",
	"LatencyTarget": "adaptive.latency_target", "Percentile": "adaptive.percentile", "ErrorRate": "adaptive.error_rate",
	"Decrease": "adaptive.decrease", "Increase": "adaptive.increase"}

// config is the adaptive.Config of a rule's Adaptive, ceiling its rate.
// A step judges at least minSamples responses, fewer than the
// controller's default at a low floor: at the floor, a window sees about
// Floor × 5 s of them, and a step that never has enough would hold the
// rate at the floor for good.
func (a *Adaptive) config(ceiling float64) adaptive.Config {
	return adaptive.Config{Floor: a.Floor, Ceiling: ceiling, LatencyTarget: a.LatencyTarget, Percentile: a.Percentile,
		ErrorRate: a.ErrorRate, Decrease: a.Decrease, Increase: a.Increase, MinSamples: minSamples(a.Floor)}
}

// minSamples is the fewest responses an adaptive rule judges a step on:
// 4 s of responses at the floor, from 5 to 100.
func minSamples(floor float64) int {
	return int(min(100, max(5, math.Ceil(floor*4))))
}

// validateAdaptive checks a rule's adaptive rate.
func validateAdaptive(r *Rule, bad badFunc) {
	if r.Adaptive == (Adaptive{}) {
		return
	}
	if len(r.Limits) > 0 || r.MaxInFlight != 0 {
		bad("adaptive", "only a rule with one token bucket can adapt its rate")
		return
	}
	if len(r.LimitKeys) != 1 || r.LimitKeys[0] != "global" {
		bad("adaptive", `only a rule with "limit_keys": ["global"] can adapt: its rate is weighed against the upstream's whole throughput`)
	}
	if _, err := adaptive.New(r.Adaptive.config(r.Rate)); err != nil {
		var fe *adaptive.FieldError
		if !errors.As(err, &fe) {
			bad("adaptive", "%v", err)
			return
		}
		field, rest := adaptiveFields[fe.Field], "must "+fe.Must+", got "+fe.Got
		if fe.Field == "Ceiling" {
			rest = "must be at least adaptive.floor, the least the rate falls to"
		}
		bad(cmp.Or(field, "adaptive"), "%s", rest)
	}
}

// adaptiveOf gives adaptive rule r its controller: the one its ID had if
// its settings are the same, so that a reload keeps the rate it reached;
// else a new one, starting from that rate if there was one, within the
// new bounds. Into ctrls, the controllers of the rule set being compiled.
// Its rate is the one the rule binds at.
func (l *Middleware) adaptiveOf(r *rule, ctrls map[string]*ruleAdaptive) error {
	if !inMemory(l.opts.store) {
		return fmt.Errorf("httplimit: rule %q: an adaptive rate changes the limit in place, which only the in-memory store can: "+
			"a shared store would start every key afresh at each step", r.Name)
	}
	id := limitID(&r.Rule)
	cfg := r.Adaptive.config(r.Rate)
	old := l.adaptive[id]
	if old != nil && old.cfg == cfg {
		ctrls[id], r.adapt = old, old
		return nil
	}
	if old != nil {
		cfg.Initial = min(max(old.c.Rate(), cfg.Floor), cfg.Ceiling)
	}
	c, err := adaptive.New(cfg)
	if err != nil {
		return fmt.Errorf("httplimit: rule %q: %w", r.Name, err) // validated: not reached
	}
	ra := &ruleAdaptive{c: c, cfg: cfg}
	ctrls[id], r.adapt = ra, ra
	return nil
}

// ruleAdaptive is the controller of an adaptive rule, kept across
// reloads with the settings it was made with.
type ruleAdaptive struct {
	c   *adaptive.Controller
	cfg adaptive.Config
}

// rate is r's rate now: its controller's, or its own.
func (r *rule) rate() float64 {
	if r.adapt != nil {
		return r.adapt.c.Rate()
	}
	return r.Rate
}

// adaptEvery is how often the adaptive rates step.
const adaptEvery = time.Second

// adaptLoop steps the adaptive rules every adaptEvery until Close.
func (l *Middleware) adaptLoop() {
	defer close(l.adapted)
	tk := time.NewTicker(adaptEvery)
	defer tk.Stop()
	for {
		select {
		case <-l.stopAdapt:
			return
		case <-tk.C:
			l.stepAdaptive(l.opts.now())
		}
	}
}

// stepAdaptive steps every adaptive rule in force at now, and gives its
// buckets the rate it set.
func (l *Middleware) stepAdaptive(now time.Time) {
	for _, r := range l.set.Load().rules {
		if r.adapt == nil {
			continue
		}
		rate, changed := r.adapt.c.Step(now)
		if !changed {
			continue
		}
		if rt, ok := r.lim.(engine.Retuner); ok {
			// Within the rule's domain: the floor and the rate were
			// validated as limits.
			rt.SetAt(now, engine.Limit(rate), r.Burst)
		}
	}
}

// startAdapting starts the loop that steps adaptive rules, once.
func (l *Middleware) startAdapting() {
	if l.stopAdapt == nil {
		l.stopAdapt, l.adapted = make(chan struct{}), make(chan struct{})
		go l.adaptLoop()
	}
}

// observer is the ResponseWriter of a request under an adaptive rule: it
// notes when the response's header is written, and its status.
type observer struct {
	http.ResponseWriter
	status int
	at     time.Time
	now    func() time.Time
}

func (o *observer) WriteHeader(code int) {
	if o.status == 0 && code >= 200 {
		o.status, o.at = code, o.now()
	}
	o.ResponseWriter.WriteHeader(code)
}

func (o *observer) Write(b []byte) (int, error) {
	if o.status == 0 {
		o.status, o.at = http.StatusOK, o.now()
	}
	return o.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer's Flush, Hijack
// and deadlines.
func (o *observer) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// Flush flushes the writer, if it can: a handler that streams (server-sent
// events) and asserts http.Flusher keeps working under an adaptive rule.
func (o *observer) Flush() {
	if o.status == 0 {
		o.status, o.at = http.StatusOK, o.now()
	}
	http.NewResponseController(o.ResponseWriter).Flush()
}

// bodyClock is the body of a request under an adaptive rule: it notes
// when the body was read whole, when the upstream has the whole request,
// so that a client that sends its body slowly does not pass its slowness
// for the upstream's. Read by the proxy's goroutines, end is read by the
// handler's.
type bodyClock struct {
	io.ReadCloser
	left int64 // bytes still to come; -1 when the length is unknown
	now  func() time.Time
	end  atomic.Int64 // Unix nanoseconds when read whole; 0 before
}

func (b *bodyClock) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left > 0 {
		b.left -= int64(min(int64(n), b.left))
	}
	if (err != nil || b.left == 0) && b.end.Load() == 0 {
		b.end.Store(b.now().UnixNano())
	}
	return n, err
}

// clockBody gives r, under an adaptive rule, a body that notes when it was
// read whole, in a copy of r; r itself if it has no body.
func (l *Middleware) clockBody(r *http.Request) (*http.Request, *bodyClock) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return r, nil
	}
	c := &bodyClock{ReadCloser: r.Body, left: r.ContentLength, now: l.opts.now}
	r2 := *r
	r2.Body = c
	return &r2, c
}

// observeUpstream reports the response of a request passed on at start to the
// controllers cs: unless the request's context ended, which is its
// client's doing (a disconnect must not steer the rate), its latency to
// the header, and whether it failed with a server error (a 5xx, 504 for
// an upstream that timed out). The latency starts when the upstream had
// the whole request: the body's end, if the client sent one before the
// response began, and the time spent sending it is the client's.
//
// The observation is dated when the request was passed on, not when it
// ended: a step that finds the upstream unhealthy judges the requests sent
// until then, and those still in the upstream's queue, sent at the rate
// it just lowered, must not count against the lower rate too.
func (l *Middleware) observeUpstream(r *http.Request, o *observer, start time.Time, body *bodyClock, cs []*ruleAdaptive) {
	if r.Context().Err() != nil {
		return
	}
	passed := start
	now := l.opts.now()
	at, status := o.at, o.status
	if status == 0 {
		at, status = now, http.StatusOK
	}
	if body != nil {
		if end := body.end.Load(); end != 0 {
			if t := time.Unix(0, end); t.After(start) && t.Before(at) {
				start = t
			}
		}
	}
	for _, c := range cs {
		c.c.Observe(passed, at.Sub(start), status >= 500)
	}
}
