package httplimit_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// remaining returns the r of the only RateLimit item after one request.
func remaining(t *testing.T, l *httplimit.Middleware, remote string, headers ...string) string {
	t.Helper()
	return serve(l, req(remote, "/", headers...)).Header().Get("RateLimit")
}

func TestSpoofedForwardedForIsIgnored(t *testing.T) {
	l, _ := newLimiter(t, perIP, httplimit.Options{})
	for i := range 20 {
		// A client rotating X-Forwarded-For stays in its own bucket.
		remaining(t, l, "203.0.113.9:5000", "X-Forwarded-For", fmt.Sprintf("10.0.0.%d", i))
	}
	if got := remaining(t, l, "203.0.113.9:5000", "X-Forwarded-For", "10.0.0.99"); got != `"per-ip";r=0;t=1` {
		t.Errorf("after 20 spoofed requests: %s, want the drained bucket of 203.0.113.9", got)
	}
	// The addresses it named were never charged.
	if got := remaining(t, l, "10.0.0.1:1"); got != `"per-ip";r=19;t=0` {
		t.Errorf("victim named in X-Forwarded-For: %s, want a full bucket", got)
	}
}

func TestTrustedProxiesRightToLeft(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	l, _ := newLimiter(t, perIP, httplimit.Options{TrustedProxies: proxies})
	key := func(remote string, headers ...string) string {
		t.Helper()
		// Each client has a fresh bucket unless it was seen: compare by
		// draining it with a marker cost of one request and reading r.
		return remaining(t, l, remote, headers...)
	}
	for _, tt := range []struct {
		name    string
		remote  string
		headers []string
		client  string // whose bucket is charged
	}{
		{"untrusted remote, header ignored", "203.0.113.1:1", []string{"X-Forwarded-For", "198.51.100.1"}, "203.0.113.1"},
		{"trusted remote, one hop", "10.1.1.1:1", []string{"X-Forwarded-For", "198.51.100.2"}, "198.51.100.2"},
		{"spoofed left part ignored", "10.1.1.1:1", []string{"X-Forwarded-For", "1.1.1.1, 198.51.100.3"}, "198.51.100.3"},
		{"trusted hops skipped", "10.1.1.1:1", []string{"X-Forwarded-For", "198.51.100.4, 10.2.2.2, 10.3.3.3"}, "198.51.100.4"},
		{"every line, last first", "10.1.1.1:1", []string{"X-Forwarded-For", "1.1.1.1", "X-Forwarded-For", "198.51.100.5, 10.9.9.9"}, "198.51.100.5"},
		{"walk goes on to earlier lines", "10.1.1.1:1", []string{"X-Forwarded-For", "198.51.100.6", "X-Forwarded-For", "10.9.9.9"}, "198.51.100.6"},
		{"unparsable hop stops the walk", "10.1.1.1:1", []string{"X-Forwarded-For", "198.51.100.7, garbage, 10.4.4.4"}, "10.4.4.4"},
		{"all trusted: the farthest", "10.1.1.1:1", []string{"X-Forwarded-For", "10.5.5.5, 10.6.6.6"}, "10.5.5.5"},
		{"ports and brackets", "10.1.1.1:1", []string{"X-Forwarded-For", "[2001:db8:1::1]:443"}, "2001:db8:1::1"},
		{"trusted IPv6 proxy", "[2001:db8:ffff::1]:80", []string{"X-Forwarded-For", "198.51.100.8"}, "198.51.100.8"},
		{"IPv4-mapped remote", "[::ffff:10.1.1.1]:1", []string{"X-Forwarded-For", "198.51.100.9"}, "198.51.100.9"},
	} {
		t.Run("case="+tt.name, func(t *testing.T) {
			before := key(tt.client + ":0")
			key(tt.remote, tt.headers...)
			after := key(tt.client + ":0")
			if before == after {
				t.Errorf("%s's bucket was not charged: %s then %s", tt.client, before, after)
			}
		})
	}
}

func TestForwardedHeader(t *testing.T) {
	l, _ := newLimiter(t, perIP, httplimit.Options{
		TrustedProxies:  []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		ForwardedHeader: "Forwarded",
	})
	remaining(t, l, "10.1.1.1:1", "Forwarded", `for=1.1.1.1, for="[2001:db8:cafe::17]:4711";proto=https`,
		"X-Forwarded-For", "198.51.100.50")
	if got := remaining(t, l, "[2001:db8:cafe::99]:1"); got != `"per-ip";r=18;t=0` {
		t.Errorf("the Forwarded client's /64: %s, want one request charged before this one", got)
	}
	if got := remaining(t, l, "198.51.100.50:1"); got != `"per-ip";r=19;t=0` {
		t.Errorf("X-Forwarded-For was read with ForwardedHeader Forwarded: %s", got)
	}
}

func TestIPv6KeyedByPrefix(t *testing.T) {
	l, _ := newLimiter(t, perIP, httplimit.Options{})
	for i := range 20 {
		remaining(t, l, fmt.Sprintf("[2001:db8:1:2:%x::1]:443", i+1))
	}
	if got := remaining(t, l, "[2001:db8:1:2:ffff::5%eth0]:1"); got != `"per-ip";r=0;t=1` {
		t.Errorf("rotating inside one /64: %s, want the drained shared bucket", got)
	}
	if got := remaining(t, l, "[2001:db8:1:3::1]:1"); got != `"per-ip";r=19;t=0` {
		t.Errorf("next /64: %s, want its own bucket", got)
	}
	narrow, _ := newLimiter(t, perIP, httplimit.Options{IPv6Prefix: 128})
	remaining(t, narrow, "[2001:db8::1]:1")
	if got := remaining(t, narrow, "[2001:db8::2]:1"); got != `"per-ip";r=19;t=0` {
		t.Errorf("IPv6Prefix 128: %s, want one bucket per address", got)
	}
}

func TestBadRemoteAddrSharesTheEmptyKey(t *testing.T) {
	l, _ := newLimiter(t, perIP, httplimit.Options{})
	remaining(t, l, "@")
	if got := remaining(t, l, ""); got != `"per-ip";r=18;t=0` {
		t.Errorf("unparsable remote addresses: %s, want one shared bucket", got)
	}
}

func TestOptionErrors(t *testing.T) {
	rules, _ := httplimit.ParseRules([]byte(perIP))
	for _, o := range []httplimit.Options{
		{ForwardedHeader: "X-Real-IP"}, {IPv6Prefix: 129}, {IPv4Prefix: -1}, {Headers: 0x80},
		{TrustedProxies: []netip.Prefix{{}}},
	} {
		if _, err := httplimit.New(rules, o); err == nil {
			t.Errorf("New with %+v: no error", o)
		}
	}
}

// FromTrustedProxy answers as the client address is found: only a
// RemoteAddr inside Options.TrustedProxies is a proxy whose header counts.
func TestFromTrustedProxy(t *testing.T) {
	l, err := httplimit.New([]httplimit.Rule{{Name: "r", LimitKeys: []string{"ip:address"}, Rate: 1, Burst: 1}}, httplimit.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for addr, want := range map[string]bool{
		"10.1.2.3:443": true, "[::ffff:10.1.2.3]:1": true, "[2001:db8::1]:80": true,
		"11.0.0.1:443": false, "[2001:db9::1]:80": false, "garbage": false, "": false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		if got := l.FromTrustedProxy(r); got != want {
			t.Errorf("FromTrustedProxy(%q) = %v, want %v", addr, got, want)
		}
	}
	// Without trusted proxies, no address is one.
	none, err := httplimit.New([]httplimit.Rule{{Name: "r", LimitKeys: []string{"ip:address"}, Rate: 1, Burst: 1}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	for _, addr := range []string{"10.1.2.3:443", "127.0.0.1:80", "[::1]:80", "garbage"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		if none.FromTrustedProxy(r) {
			t.Errorf("FromTrustedProxy(%q) without trusted proxies = true", addr)
		}
	}
}
