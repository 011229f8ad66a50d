package httplimit

import (
	"context"
	"net/http"
	"time"
)

// WriteProblemCached returns WriteProblem as Handler calls it: with the
// rate-limit values kept, between calls, in one Middleware's caches.
func WriteProblemCached() func(*Result, http.ResponseWriter) {
	vals := newHeaderValues()
	return func(res *Result, w http.ResponseWriter) { res.writeProblem(w, vals) }
}

// SetSleep replaces how the Middleware waits in delay mode, to run it on
// a virtual clock.
func SetSleep(l *Middleware, f func(context.Context, time.Duration) error) { l.opts.sleep = f }

// InFlightKeys returns how many keys have an entry in the in-flight
// tables of the rules in force.
func InFlightKeys(l *Middleware) int {
	n := 0
	for _, r := range l.set.Load().rules {
		if r.inflight != nil {
			n += r.inflight.keys.Size()
		}
	}
	return n
}

// StepAdaptive steps the adaptive rules at now, as the loop does every
// second.
func StepAdaptive(l *Middleware, now time.Time) { l.stepAdaptive(now) }
