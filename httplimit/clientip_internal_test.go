package httplimit

import (
	"net/netip"
	"testing"
)

// appendIPKey appends what the address's or its prefix's String gives, for
// every family and prefix length.
func TestAppendIPKeyIsString(t *testing.T) {
	addrs := []string{"192.0.2.1", "0.0.0.0", "255.255.255.255", "10.1.2.3", "2001:db8::1", "::", "::1",
		"2001:db8:1:2:3:4:5:6", "fe80::1", "::ffff:0:1.2.3.4", "64:ff9b::192.0.2.1"}
	for _, s := range addrs {
		ip := netip.MustParseAddr(s)
		for _, o := range []*options{{ipv4Prefix: 32, ipv6Prefix: 64}, {ipv4Prefix: 24, ipv6Prefix: 128}, {ipv4Prefix: 1, ipv6Prefix: 1}, {ipv4Prefix: 31, ipv6Prefix: 127}} {
			want := ip.String()
			if bits := o.ipv6Prefix; !ip.Is4() || o.ipv4Prefix != 32 {
				if ip.Is4() {
					bits = o.ipv4Prefix
				}
				p, _ := ip.Prefix(bits)
				want = p.String()
			}
			if got := string(o.appendIPKey([]byte("x"), ip)); got != "x"+want {
				t.Errorf("appendIPKey(%s) with /%d and /%d: %q, want %q", s, o.ipv4Prefix, o.ipv6Prefix, got, "x"+want)
			}
		}
	}
}
