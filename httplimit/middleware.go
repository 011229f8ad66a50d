package httplimit

import "net/http"

// Handler returns next behind the limiter: every request is checked; an
// allowed one reaches next with the rate-limit headers already set on the
// response, a denied one gets a 429 (or 503) with problem details and never
// reaches next.
func (l *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := l.Check(r)
		if !res.Allowed {
			res.WriteProblem(w)
			return
		}
		res.WriteHeaders(w.Header())
		next.ServeHTTP(w, r)
	})
}
