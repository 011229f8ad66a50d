package httplimit

import (
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

// Handler returns next behind the limiter: every request is checked; an
// allowed one reaches next with the rate-limit headers already set on the
// response, a denied one gets a 429 (or 503) with problem details and never
// reaches next. A request under a rule in delay mode may first wait its
// turn (Result.Delay): if its context ends meanwhile, it gives its tokens
// back and gets a 503 (ReasonCancelled), which its client has usually left
// too late to read. A request under an in-flight limit holds its slot
// until next returns, or panics.
//
// An admitted request costs Handler no allocation once the memory it
// reuses has grown to its needs and the values of its rate-limit fields
// have been written before (each is kept by its text, in a bounded cache
// from which other values can push it). It still allocates for: keys given
// to a store other than NewMemoryStore's, which may keep them (each is then
// its own string); claims verified by Options.JWT, an unverified payload
// with escapes or bytes that are not UTF-8, or a claim that is an object or
// an array (decoded into Claims); a query parameter's %-escapes; the
// forwarding header of a trusted proxy; a path not in canonical form (the
// request is copied with the canonical one); keys and token over 16 KiB in
// all; more than 8 rules that apply; a denial or refusal, and a shadow
// rule's would-deny; a wait in delay mode; a key's first request in
// flight under an in-flight limit.
//
// The values of the rate-limit fields are shared by the responses that
// carry the same text: next may replace a field (Header.Set, Header.Del,
// Header.Add) but must not write into its slice (Header()[name][0] = ...).
func (l *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, res, ok := l.canonical(r)
		if !ok {
			res.WriteProblem(w)
			return
		}
		sc := getScratch()
		res = l.decide(r, sc, -1, false, true, true)
		if !res.Allowed {
			res.writeProblem(w, l.values)
			putScratch(sc)
			return
		}
		res.writeHeaders(w.Header(), l.values)
		if res.Delay == 0 && sc.nslots == 0 && sc.nobs == 0 {
			// Given back before next runs, however long that takes: the
			// headers are written, and nothing refers to sc any more.
			putScratch(sc)
			next.ServeHTTP(w, r)
			return
		}
		l.serveHeld(w, r, sc, res.Delay, next)
	})
}

// serveHeld serves an admitted request that must wait its turn, holds
// in-flight slots or is watched by adaptive rules, whose headers are
// written: it waits, then runs next, then gives the slots back and
// reports the response.
//
// Its frame is kept small, the Result left behind: a request waits on the
// stack of its connection's goroutine, which a larger frame can make grow.
func (l *Middleware) serveHeld(w http.ResponseWriter, r *http.Request, sc *scratch, delay time.Duration, next http.Handler) {
	var held [maxTakes]heldSlot
	slots := held[:copy(held[:], sc.slots[:sc.nslots])]
	var watched [maxTakes]*ruleAdaptive
	cs := watched[:copy(watched[:], sc.observers[:sc.nobs])]
	at, waiter := sc.slotsAt, sc.waiter
	sc.nslots = 0 // the slots are held here now
	putScratch(sc)
	if len(slots) > 0 {
		defer l.releaseAfter(w, slots, at)
	}
	if delay > 0 && !l.await(r.Context(), waiter, delay) {
		l.writeCancelled(w)
		return
	}
	if len(cs) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	o := &observer{ResponseWriter: w, now: l.opts.now}
	r, body := l.clockBody(r)
	start := l.opts.now()
	next.ServeHTTP(o, r)
	l.observeUpstream(r, o, start, body, cs)
}

// writeCancelled answers a request whose wait ended with its context.
//
//go:noinline
func (l *Middleware) writeCancelled(w http.ResponseWriter) {
	cancelled := Result{Status: http.StatusServiceUnavailable, Reason: ReasonCancelled, Headers: l.opts.headers}
	cancelled.writeProblemSlow(w, l.values)
}

// Admit decides on r as Handler does, for a caller that serves the
// request itself, such as a gRPC interceptor: when Admit returns, an
// admitted request has waited its turn (delay mode), and it holds its
// in-flight slots until done is called, when the request is finished.
// done is never nil, and only its first call counts; call it after a
// denial too. If r's context ends while it waits, the Result is the 503
// of ReasonCancelled.
func (l *Middleware) Admit(r *http.Request) (res Result, done func()) {
	r, res, ok := l.canonical(r)
	if !ok {
		return res, nothing
	}
	sc := getScratch()
	res = l.decide(r, sc, -1, false, false, true)
	res.Policies = append(make([]Policy, 0, len(res.Policies)), res.Policies...)
	if !res.Allowed {
		putScratch(sc)
		return res, nothing
	}
	slots := append([]heldSlot(nil), sc.slots[:sc.nslots]...)
	at, waiter := sc.slotsAt, sc.waiter
	sc.nslots = 0
	putScratch(sc)
	done = nothing
	if len(slots) > 0 {
		var once atomic.Bool
		done = func() {
			if once.CompareAndSwap(false, true) {
				l.releaseAll(slots, l.opts.now().Sub(at))
			}
		}
	}
	if res.Delay > 0 && !l.await(r.Context(), waiter, res.Delay) {
		done()
		return Result{Status: http.StatusServiceUnavailable, Reason: ReasonCancelled, Policies: []Policy{}, Headers: l.opts.headers}, nothing
	}
	return res, done
}

// nothing is the done of a request that holds nothing.
func nothing() {}

// AfterResponder is implemented by a ResponseWriter whose response can
// outlive its handler, its body sent by the server after the handler
// returned (as fasthttp streams a body). AfterResponse reports whether the
// writer will call f once the response was sent, or failed, in which case
// a request's in-flight slots are held until then; false if the response
// ended with the handler. The Handler finds it through Unwrap.
type AfterResponder interface {
	AfterResponse(f func()) bool
}

// releaseAfter gives back the slots held since at once the response has
// been sent: now, or later for a writer whose response outlives the
// handler.
func (l *Middleware) releaseAfter(w http.ResponseWriter, slots []heldSlot, at time.Time) {
	for w != nil {
		if o, ok := w.(AfterResponder); ok {
			held := slices.Clone(slots)
			if o.AfterResponse(func() { l.releaseAll(held, l.opts.now().Sub(at)) }) {
				return
			}
			break
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	l.releaseAll(slots, l.opts.now().Sub(at))
}
