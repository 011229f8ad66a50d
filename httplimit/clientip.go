package httplimit

import (
	"net/http"
	"net/netip"
	"strings"
)

// clientIP finds the client's address: RemoteAddr, or, when RemoteAddr is a
// trusted proxy, the nearest untrusted hop of the forwarding header.
//
// The header is read right to left over every line (a proxy appends; a
// client can only prepend), skipping trusted proxies, so a client cannot
// choose its address by sending the header itself. A hop that does not parse
// stops the walk at the last address that was vouched for.
func (o *options) clientIP(r *http.Request) (netip.Addr, bool) {
	ip, ok := parseHost(r.RemoteAddr)
	if !ok || !o.trusted(ip) {
		return ip, ok
	}
	var lines []string
	if o.forwarded {
		lines = r.Header.Values("Forwarded")
	} else {
		lines = r.Header.Values("X-Forwarded-For")
	}
	for i := len(lines) - 1; i >= 0; i-- {
		hops := strings.Split(lines[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			hop, ok := o.hop(hops[j])
			if !ok {
				return ip, true
			}
			ip = hop
			if !o.trusted(hop) {
				return hop, true
			}
		}
	}
	return ip, true // every hop is a trusted proxy: the farthest one
}

// FromTrustedProxy reports whether r comes from one of
// Options.TrustedProxies, whose forwarding header the Middleware believes: a
// proxy in front of the limiter passes that header on only then, and
// replaces it otherwise.
func (l *Middleware) FromTrustedProxy(r *http.Request) bool {
	if len(l.opts.trustedProxies) == 0 {
		return false // the common case, asked of every proxied request
	}
	ip, ok := parseHost(r.RemoteAddr)
	return ok && l.opts.trusted(ip)
}

func (o *options) trusted(ip netip.Addr) bool {
	for _, p := range o.trustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// hop parses one element of the forwarding header.
func (o *options) hop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if !o.forwarded {
		return parseHost(s)
	}
	// Forwarded (RFC 7239): for=<node> among ;-separated pairs.
	for pair := range strings.SplitSeq(s, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && strings.EqualFold(k, "for") {
			return parseHost(strings.Trim(v, `"`))
		}
	}
	return netip.Addr{}, false
}

// parseHost parses "ip", "ip:port", "[ipv6]" or "[ipv6]:port", unmapping
// IPv4-mapped IPv6 and dropping zones.
func parseHost(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

// appendIPKey appends the bucket key of an address to b: the address for
// IPv4 (or its prefix, if configured shorter than 32), the masked prefix for
// IPv6 (a /64 by default, so that a client cannot escape its bucket by
// rotating addresses inside its own network). It is the address's or the
// prefix's String, appended rather than allocated.
func (o *options) appendIPKey(b []byte, ip netip.Addr) []byte {
	bits := o.ipv6Prefix
	if ip.Is4() {
		bits = o.ipv4Prefix
		if bits == 32 {
			return ip.AppendTo(b)
		}
	}
	p, _ := ip.Prefix(bits)
	return p.AppendTo(b)
}
