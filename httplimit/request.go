package httplimit

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// request caches what rules read from one request: each part is computed at
// most once, and only if some rule needs it.
type request struct {
	r      *http.Request
	o      *options
	sc     *scratch
	direct bool // RemoteAddr is the client (check API)
	// borrow lets the keys composed in q.sc.buf share its bytes (borrowed);
	// otherwise they are copies of their own.
	borrow bool
	ip     string
	ipDone bool
	claims Claims
	// payload is the token's payload, when scanClaim reads the claims
	// from it (claims is then nil).
	payload []byte
	jwt     bool
	// bad is why a value the rules read has no single value (see
	// header); decide takes it after each rule.
	bad string
}

func (q *request) clientKey() string {
	if !q.ipDone {
		q.ipDone = true
		var ip netip.Addr
		var ok bool
		if q.direct {
			ip, ok = parseHost(q.r.RemoteAddr)
		} else {
			ip, ok = q.o.clientIP(q.r) // parses RemoteAddr itself
		}
		if ok {
			start := len(q.sc.buf)
			q.sc.buf = q.o.appendIPKey(q.sc.buf, ip)
			q.ip = q.text(q.sc.buf[start:])
		}
	}
	return q.ip
}

// text is b, bytes of the scratch's buffer, as a string: borrowed, or a
// copy.
func (q *request) text(b []byte) string {
	if q.borrow {
		return borrowed(b)
	}
	return string(b)
}

// keep gives the scratch's buffer away to the strings borrowed from it, for a
// denied request: a Denial may keep its key, and what it was composed from,
// for as long as its receiver likes. The scratch gets a new buffer of the
// same size.
func (q *request) keep() {
	if q.borrow && len(q.sc.buf) > 0 {
		q.sc.buf = make([]byte, 0, cap(q.sc.buf))
	}
}

func (q *request) claim(name string) (string, bool) {
	if !q.jwt {
		q.jwt = true
		q.claims, q.payload = q.o.claims(q.r, &q.sc.buf)
	}
	if q.payload == nil {
		return claimString(q.claims, name)
	}
	v, found, nested := scanClaim(q.payload, name)
	if nested {
		// Only a decoder writes an object's text as claimString does. The
		// payload is valid JSON: it decodes.
		q.claims, _ = decodeClaims(q.payload)
		q.payload = nil
		return claimString(q.claims, name)
	}
	if !found {
		return "", false
	}
	return q.text(v), true
}

// value is the request's value for one key; ok is false when it lacks it.
func (q *request) value(k keySpec) (string, bool) {
	switch k.kind {
	case kindIP:
		ip := q.clientKey()
		return ip, ip != ""
	case kindHeader:
		return q.header(k.name)
	case kindQuery:
		return q.param(k.name)
	case kindPath:
		return q.r.URL.Path, true
	case kindMethod:
		// HEAD runs the GET handler on most servers: one bucket for both.
		if m := q.method(); m != http.MethodHead {
			return m, true
		}
		return http.MethodGet, true
	case kindJWT:
		return q.claim(k.name)
	case kindGlobal:
		return "", true
	}
	return "", false
}

// key is the rule's bucket key: the value of its one limit key, or its
// values length-prefixed so that no two combinations collide. A missing
// value counts as "": requests lacking a key share one bucket, so leaving a
// header out is never a way around a limit.
func (q *request) key(keys []keySpec) string {
	if len(keys) == 1 {
		v, _ := q.value(keys[0])
		return v
	}
	// Each value first: one that is computed (the client's address) lands
	// in the buffer, which must then hold the key's bytes alone.
	for _, k := range keys {
		q.value(k)
	}
	start := len(q.sc.buf)
	for _, k := range keys {
		v, _ := q.value(k)
		q.sc.buf = strconv.AppendInt(q.sc.buf, int64(len(v)), 10)
		q.sc.buf = append(q.sc.buf, ':')
		q.sc.buf = append(q.sc.buf, v...)
	}
	return q.text(q.sc.buf[start:])
}

// matcher is one entry of a rule's match.
type matcher struct {
	spec   keySpec
	values []string
}

func (m *matcher) holds(q *request) bool {
	switch m.spec.kind {
	case kindPathPrefix:
		for _, v := range m.values {
			if strings.HasPrefix(q.r.URL.Path, v) {
				return true
			}
		}
		return false
	case kindMethod:
		// A rule on GET covers HEAD, which runs the same handler.
		got := q.method()
		return m.has(got) || got == http.MethodHead && m.has(http.MethodGet)
	}
	got, ok := q.value(m.spec)
	return ok && m.has(got)
}

func (m *matcher) has(v string) bool {
	for _, w := range m.values {
		if v == w {
			return true
		}
	}
	return false
}

// matches reports whether every entry of the rule's match holds. When one
// has no single value to compare (q.bad) and every other entry holds, it
// leaves q.bad set: whether the rule applies is then the client's choice.
func (r *rule) matches(q *request) bool {
	bad := ""
	for i := range r.match {
		ok := r.match[i].holds(q)
		if why := q.takeBad(); why != "" {
			if bad == "" {
				bad = why
			}
			continue
		}
		if !ok {
			return false
		}
	}
	q.bad = bad
	return bad == ""
}
