package httplimit

import "net/http"

// WriteProblemCached returns WriteProblem as Handler calls it: with the
// rate-limit values kept, between calls, in one Middleware's caches.
func WriteProblemCached() func(*Result, http.ResponseWriter) {
	vals := newHeaderValues()
	return func(res *Result, w http.ResponseWriter) { res.writeProblem(w, vals) }
}
