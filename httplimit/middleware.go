package httplimit

import "net/http"

// Handler returns next behind the limiter: every request is checked; an
// allowed one reaches next with the rate-limit headers already set on the
// response, a denied one gets a 429 (or 503) with problem details and never
// reaches next.
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
// rule's would-deny.
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
		res = l.decide(r, sc, -1, false, true)
		if !res.Allowed {
			res.writeProblem(w, l.values)
			putScratch(sc)
			return
		}
		res.writeHeaders(w.Header(), l.values)
		// Given back before next runs, however long that takes: the
		// headers are written, and nothing refers to sc any more.
		putScratch(sc)
		next.ServeHTTP(w, r)
	})
}
