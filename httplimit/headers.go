package httplimit

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// JitteredRetryAfter is the Retry-After of a denial: the longest wait any
// enforced policy needs (at least 1 s), plus a jitter in [0, 50 %] of it
// (at most 300 s when a calendar quota or strict window denied) that is the same every time
// for one key of the denying policy (and one seed), so that clients denied
// together do not all come back together, and each client sees a stable
// value. The jitter is never negative, so
// Retry-After is never earlier than any RateLimit t, as the draft requires.
func (res *Result) JitteredRetryAfter(seed uint64) int64 {
	base := int64(1)
	for i := range res.Policies {
		p := &res.Policies[i]
		if p.Mode == ModeEnforce && !p.Unknown && p.RetryIn > base {
			base = p.RetryIn
		}
	}
	var key string
	span := base / 2
	for i := range res.Policies {
		if p := &res.Policies[i]; p.Name == res.DeniedBy {
			key = p.Key
			if p.Shape != "" {
				// A quota's renewal, a window's emptying, may be days
				// away: spreading its clients over half of that would keep
				// them out for days after they have their tokens back.
				span = min(span, maxQuotaJitter)
			}
		}
	}
	return base + jitterIn(seed, res.DeniedBy, key, span)
}

// maxQuotaJitter bounds, in seconds, the jitter of a denial by a calendar
// quota or a strict window: clients denied until one renewal come back
// spread over five minutes after it.
const maxQuotaJitter = 300

// jitterIn returns a value in [0, span], a deterministic function of the
// seed and the identity (rule name and bucket key).
func jitterIn(seed uint64, rule, key string, span int64) int64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(rule))
	h.Write([]byte{0})
	h.Write([]byte(key))
	x := mix64(h.Sum64())
	u := float64(x>>11) / (1 << 53) // uniform in [0, 1)
	return int64(u * float64(span+1))
}

// mix64 is the SplitMix64 finalizer: FNV's high bits are weak for short
// inputs.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Header names in http.Header's canonical form, assigned directly so that
// writing them does not canonicalise (and allocate) on every request.
var (
	hdrPolicy     = textproto.CanonicalMIMEHeaderKey("RateLimit-Policy")
	hdrState      = textproto.CanonicalMIMEHeaderKey("RateLimit")
	hdrRetryAfter = textproto.CanonicalMIMEHeaderKey("Retry-After")
	hdrReason     = textproto.CanonicalMIMEHeaderKey(ReasonHeader)
	hdrType       = textproto.CanonicalMIMEHeaderKey("Content-Type")
	hdrLength     = textproto.CanonicalMIMEHeaderKey("Content-Length")
	hdrCache      = textproto.CanonicalMIMEHeaderKey("Cache-Control")
	hdrLegacy     = [2][3]string{
		{textproto.CanonicalMIMEHeaderKey("RateLimit-Limit"), textproto.CanonicalMIMEHeaderKey("RateLimit-Remaining"), textproto.CanonicalMIMEHeaderKey("RateLimit-Reset")},
		{textproto.CanonicalMIMEHeaderKey("X-RateLimit-Limit"), textproto.CanonicalMIMEHeaderKey("X-RateLimit-Remaining"), textproto.CanonicalMIMEHeaderKey("X-RateLimit-Reset")},
	}
)

// WriteHeaders sets the rate-limit header fields of the result on h:
// RateLimit-Policy and RateLimit (draft-10) and, as configured, the legacy
// fields; on a denial also Retry-After and the reason header. Shadow rules
// take part only when Result.Headers has HeadersShadow.
func (res *Result) WriteHeaders(h http.Header) {
	res.writeHeaders(h, nil)
}

// writeHeaders is WriteHeaders, with the rate-limit values from vals.
func (res *Result) writeHeaders(h http.Header, vals *headerValues) {
	shadow := res.writeLimitFields(h, vals)
	if res.RetryAfter > 0 {
		h[hdrRetryAfter] = []string{strconv.FormatInt(res.RetryAfter, 10)}
	}
	if res.Reason != "" && (shadow || !strings.HasPrefix(res.Reason, ReasonShadowPrefix)) {
		h[hdrReason] = []string{res.Reason}
	}
}

// writeLimitFields writes the fields of writeHeaders that describe the
// policies (all but Retry-After and the reason), and reports whether shadow
// rules take part.
func (res *Result) writeLimitFields(h http.Header, vals *headerValues) (shadow bool) {
	set := res.Headers
	if set&^HeadersShadow == 0 {
		set |= HeadersDraft
	}
	shadow = set&HeadersShadow != 0
	if set&HeadersDraft != 0 {
		res.writeDraft(h, vals, shadow)
	}
	if p := res.constrained(shadow); p != nil {
		for i, bit := range []HeaderSet{HeadersLegacy, HeadersX} {
			if set&bit == 0 {
				continue
			}
			names := &hdrLegacy[i]
			h[names[0]] = vals.numberValue(p.Quota)
			h[names[1]] = vals.numberValue(int64(math.Floor(p.Remaining)))
			h[names[2]] = vals.numberValue(p.FullIn)
		}
	}
	return shadow
}

// shown reports whether the header fields show p: an enforce rule, or a
// shadow rule with HeadersShadow.
func (p *Policy) shown(shadow bool) bool { return shadow || p.Mode != ModeShadow }

// tStride places RateLimit values that differ in a t apart: odd, so that
// consecutive t, like consecutive r, take distinct slots.
const tStride = 0x9e3779b97f4a7c15

func (res *Result) writeDraft(h http.Header, vals *headerValues, shadow bool) {
	var buf [256]byte
	b := buf[:0]
	var place uint64
	if len(res.Policies) == 1 && vals == nil {
		// The precomputed item itself: copied into buf, it would be copied
		// again into a new string.
		if res.Policies[0].shown(shadow) {
			h[hdrPolicy] = []string{res.Policies[0].policyItem()}
		}
	} else {
		for i := range res.Policies {
			if !res.Policies[i].shown(shadow) {
				continue
			}
			if len(b) > 0 {
				b = append(b, ", "...)
			}
			b = append(b, res.Policies[i].policyItem()...)
		}
		if len(b) > 0 {
			h[hdrPolicy], place = vals.policyValue(b)
			b = b[len(b):] // the rest of buf
		}
	}
	for i := range res.Policies {
		p := &res.Policies[i]
		if p.Unknown || !p.shown(shadow) {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		r := int64(math.Floor(p.Remaining))
		b = append(b, p.quotedName()...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, r, 10)
		place += uint64(r)
		if p.RetryIn >= 0 {
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, p.RetryIn, 10)
			place += uint64(p.RetryIn) * tStride
		}
	}
	if len(b) > 0 {
		h[hdrState] = vals.stateValue(b, place)
	}
}

// constrained is the policy the legacy fields describe: the denying rule,
// else the enforced rule with the fewest tokens left (the first on a tie),
// else, with shadow, the shadow rule with the fewest.
func (res *Result) constrained(shadow bool) *Policy {
	var best *Policy
	for i := range res.Policies {
		p := &res.Policies[i]
		if p.Unknown || !p.shown(shadow) {
			continue
		}
		if p.Name == res.DeniedBy && p.Mode == ModeEnforce {
			return p
		}
		if best == nil || (p.Mode == ModeEnforce) != (best.Mode == ModeEnforce) && p.Mode == ModeEnforce ||
			p.Mode == best.Mode && p.Remaining < best.Remaining {
			best = p
		}
	}
	return best
}

// policyItem is p's RateLimit-Policy item: precomputed by Check, else built.
func (p *Policy) policyItem() string {
	if p.policy != "" {
		return p.policy
	}
	if p.Shape == ShapeConcurrency {
		return p.quotedName() + ";q=" + strconv.FormatInt(p.Quota, 10) + `;qu="concurrent-requests"`
	}
	return policyItem(p.quotedName(), p.Quota, p.Window)
}

// quotedName is p's name as a structured-field string.
func (p *Policy) quotedName() string {
	if p.quoted != "" {
		return p.quoted
	}
	return sfString(p.Name)
}

// policyItem is the RateLimit-Policy item of a rule: its quoted name, q and
// w.
func policyItem(quoted string, quota, window int64) string {
	return quoted + ";q=" + strconv.FormatInt(quota, 10) + ";w=" + strconv.FormatInt(window, 10)
}
