package httplimit

import (
	"strconv"
	"strings"

	"github.com/faucetgo/faucet/engine"
)

// anchorSources are where a calendar quota reads a key's own anchor
// (Limit.AnchorFrom), parsed; a zero keySpec reads nothing.
type anchorSources struct {
	day, weekday, hour, zone keySpec
	any                      bool
}

func newAnchorSources(f AnchorFrom) anchorSources {
	var a anchorSources
	for _, p := range []struct {
		dst *keySpec
		src string
	}{{&a.day, f.Day}, {&a.weekday, f.Weekday}, {&a.hour, f.Hour}, {&a.zone, f.TimeZone}} {
		if p.src == "" {
			continue
		}
		// Validated: a jwt: or header: key.
		*p.dst, _ = parseKey(p.src, false)
		a.any = true
	}
	return a
}

// calendar writes to out the calendar of q's key: base with the anchor and
// zone q carries, and reports whether it differs from base. A header is
// read only on a request from a trusted proxy, which set it; a value that
// is absent, malformed or out of range leaves base's.
func (a *anchorSources) calendar(q *request, base engine.Calendar, out *engine.Calendar) bool {
	if !a.any {
		return false
	}
	c := base
	changed := false
	if v, ok := a.read(q, a.day); ok {
		if d, err := strconv.Atoi(v); err == nil && d >= 1 && d <= 31 {
			c.Day, changed = d, changed || d != base.Day
		}
	}
	if v, ok := a.read(q, a.weekday); ok {
		if w := weekdayOf(v); w > 0 {
			c.Weekday, changed = w, changed || w != base.Weekday
		}
	}
	if v, ok := a.read(q, a.hour); ok {
		if h, err := strconv.Atoi(v); err == nil && h >= 0 && h <= 23 {
			c.Hour, changed = h, changed || h != base.Hour
		}
	}
	if v, ok := a.read(q, a.zone); ok && v != "" {
		if loc, err := loadZone(v); err == nil {
			c.Location, changed = loc, true
		}
	}
	if !changed || c.Check() != nil {
		return false
	}
	*out = c
	return true
}

// read is the request's value of source k, if k is set and, for a header,
// the request came from a trusted proxy.
func (a *anchorSources) read(q *request, k keySpec) (string, bool) {
	switch k.kind {
	case kindJWT:
		return q.claim(k.name)
	case kindHeader:
		if q.direct || !q.fromTrustedProxy() {
			return "", false
		}
		return q.header(k.name)
	}
	return "", false
}

// weekdayOf is an ISO weekday, 1 (Monday) to 7, from its number or its
// English name in any case; 0 for anything else.
func weekdayOf(v string) int {
	if n, err := strconv.Atoi(v); err == nil && n >= 1 && n <= 7 {
		return n
	}
	for i, name := range weekdays {
		if strings.EqualFold(v, name) {
			return i + 1
		}
	}
	return 0
}

// fromTrustedProxy reports whether the request came from one of
// Options.TrustedProxies.
func (q *request) fromTrustedProxy() bool {
	if len(q.o.trustedProxies) == 0 {
		return false
	}
	ip, ok := parseHost(q.r.RemoteAddr)
	return ok && q.o.trusted(ip)
}
