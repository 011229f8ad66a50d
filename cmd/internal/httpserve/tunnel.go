package httpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/metrics"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http/httpguts"
)

// A request that switches protocols (Upgrade, answered 101 by the upstream)
// turns its connection into a tunnel the limiter sees nothing of: every
// request sent inside it would reach the upstream uncounted. So the proxy
// refuses CONNECT (405), never forwards the HTTP/2 connection preface
// (its target, "*", has no canonical path: the limiter answers 400) nor an
// upgrade to h2c (the request is proxied as plain HTTP/1.1, its upgrade
// headers removed), refuses any other upgrade with 403 unless --upgrade
// lists the protocol, and bounds the tunnel of an allowed one in time,
// idle time and bytes. The upgrade request itself takes its tokens as any
// request does: the gate runs after the limiter.
//
// While open, a tunnel holds its client connection's --max-conns slot: the
// server hands the listener's connection to the proxy, which is never quiet
// once hijacked and frees its slot when the proxy closes it, at the latest
// when a bound below ends the tunnel.

// upgradeVerdict is what the proxy does with a request's Upgrade header.
type upgradeVerdict int

const (
	upgradeRefused upgradeVerdict = iota // 403
	upgradeAllowed                       // forwarded; a 101 opens a bounded tunnel
	upgradeH2C                           // upgrade headers removed, proxied as plain HTTP/1.1
)

// judgeUpgrade decides on the protocols of a request's Upgrade lines: an
// offer of h2c is removed, whatever else is offered with it; otherwise every
// protocol offered must be allowed, by its name (what precedes a "/").
func judgeUpgrade(lines, allowed []string) upgradeVerdict {
	refused := len(lines) == 0
	for _, line := range lines {
		for _, p := range strings.Split(line, ",") {
			name, _, _ := strings.Cut(p, "/")
			name = strings.TrimSpace(name)
			if strings.EqualFold(name, "h2c") {
				return upgradeH2C
			}
			if !isAllowed(name, allowed) {
				refused = true
			}
		}
	}
	if refused {
		return upgradeRefused
	}
	return upgradeAllowed
}

// isAllowed reports whether protocol name is one of allowed.
func isAllowed(name string, allowed []string) bool {
	for _, a := range allowed {
		if strings.EqualFold(name, a) {
			return true
		}
	}
	return false
}

// stripUpgrade removes a request's upgrade offer: Upgrade, HTTP2-Settings,
// Connection and the fields Connection names.
func stripUpgrade(h http.Header) {
	deleteConnectionListed(h)
	h.Del("Connection")
	h.Del("Upgrade")
	h.Del("Http2-Settings")
}

// upgradeType is the protocol a request or response switches to, as
// httputil.ReverseProxy reads it: Upgrade, if Connection names it.
func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// asciiPrint reports whether s is printable ASCII, as the proxy requires
// of a protocol name.
func asciiPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// asciiEqualFold is strings.EqualFold for ASCII letters only: the proxy's
// comparison, under which K (U+212A) is not k.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// tunnelKey marks, in a request's context, an upgrade the gate allowed.
type tunnelKey struct{}

// tunnelGrant is what a tunnel needs of its client's request.
type tunnelGrant struct {
	// client reaches the client's connection after the proxy hijacked it,
	// to end the tunnel where the proxy would wait for the client.
	client *http.ResponseController
}

// tunnels opens the bounded tunnels of allowed upgrades and counts them.
type tunnels struct {
	allowed     []string
	maxDuration time.Duration
	idle        time.Duration
	maxBytes    int64

	upgrades struct{ refused, allowed, h2c, connect prometheus.Counter }
	open     prometheus.Gauge
	closed   map[string]prometheus.Counter // by reason
}

// Reasons a tunnel ends.
const (
	tunnelDuration = "duration" // --upgrade-max-duration
	tunnelIdle     = "idle"     // --upgrade-idle-timeout
	tunnelBytes    = "bytes"    // --upgrade-max-bytes
	tunnelClosed   = "closed"   // either side closed it
)

func newTunnels(f *settings.HTTP, m *metrics.Metrics) *tunnels {
	allowed, _ := settings.ParseUpgradeList(f.Upgrade) // validated
	t := &tunnels{allowed: allowed, maxDuration: f.UpgradeMaxDuration, idle: f.UpgradeIdleTimeout, maxBytes: f.UpgradeMaxBytes,
		open: m.TunnelsOpen, closed: map[string]prometheus.Counter{}}
	t.upgrades.refused = m.Upgrades.WithLabelValues("refused")
	t.upgrades.allowed = m.Upgrades.WithLabelValues("allowed")
	t.upgrades.h2c = m.Upgrades.WithLabelValues("h2c_downgraded")
	t.upgrades.connect = m.Upgrades.WithLabelValues("connect_refused")
	for _, r := range []string{tunnelDuration, tunnelIdle, tunnelBytes, tunnelClosed} {
		t.closed[r] = m.TunnelsClosed.WithLabelValues(r)
	}
	return t
}

// gate answers the requests the proxy must not forward as they are, and
// passes the others to next.
func (t *tunnels) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			t.upgrades.connect.Inc()
			writeProblem(w, http.StatusMethodNotAllowed, "CONNECT is not proxied.")
			return
		}
		lines, ok := r.Header["Upgrade"]
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		switch v := judgeUpgrade(lines, t.allowed); {
		case v == upgradeH2C:
			t.upgrades.h2c.Inc()
			stripUpgrade(r.Header)
		case upgradeType(r.Header) == "":
			// Not an offer to upgrade, as Connection does not name it:
			// the proxy drops the field, as any hop-by-hop one.
		case v == upgradeAllowed:
			t.upgrades.allowed.Inc()
			g := &tunnelGrant{client: http.NewResponseController(w)}
			r = r.WithContext(context.WithValue(r.Context(), tunnelKey{}, g))
		default:
			t.upgrades.refused.Inc()
			writeProblem(w, http.StatusForbidden, "This upgrade is not allowed.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// modifyResponse is the proxy's ModifyResponse: a 101 opens a bounded
// tunnel if the gate allowed the request's upgrade, and is a 502 otherwise.
func (t *tunnels) modifyResponse(res *http.Response) error {
	if res.StatusCode != http.StatusSwitchingProtocols {
		return nil
	}
	g, _ := res.Request.Context().Value(tunnelKey{}).(*tunnelGrant)
	if g == nil {
		return errors.New("upstream switched protocols unasked")
	}
	// As strict as the proxy's own check, which follows this one: a
	// switch it refuses after us would leave the upstream connection open.
	want, got := upgradeType(res.Request.Header), upgradeType(res.Header)
	if want == "" || !asciiPrint(got) || !asciiEqualFold(want, got) {
		return fmt.Errorf("upstream switched to protocol %q when %q was requested", got, want)
	}
	rwc, ok := res.Body.(io.ReadWriteCloser)
	if !ok {
		return errors.New("101 response without a writable body")
	}
	res.Body = t.openTunnel(rwc, g.client)
	return nil
}

// errTunnelBytes ends a tunnel that carried --upgrade-max-bytes.
var errTunnelBytes = errors.New("tunnel carried --upgrade-max-bytes")

// tunnel is the upstream side of an upgraded connection, through which the
// proxy copies both ways: it counts the bytes and the time, and ends the
// tunnel at a bound.
type tunnel struct {
	set    *tunnels
	rwc    io.ReadWriteCloser // the upstream connection
	client *http.ResponseController
	start  time.Time
	last   atomic.Int64 // time.Since(start) at the last byte either way
	used   atomic.Int64 // bytes carried, both ways
	ended  atomic.Bool
	done   chan struct{} // closed by end
	once   sync.Once
}

func (t *tunnels) openTunnel(rwc io.ReadWriteCloser, client *http.ResponseController) *tunnel {
	tn := &tunnel{set: t, rwc: rwc, client: client, start: time.Now(), done: make(chan struct{})}
	t.open.Inc()
	go tn.watch()
	return tn
}

// watch ends the tunnel at --upgrade-max-duration, or after
// --upgrade-idle-timeout without a byte.
func (tn *tunnel) watch() {
	s := tn.set
	timer := time.NewTimer(min(s.idle, s.maxDuration))
	defer timer.Stop()
	for {
		select {
		case <-tn.done:
			return
		case <-timer.C:
		}
		now := time.Since(tn.start)
		quiet := now - time.Duration(tn.last.Load())
		switch {
		case now >= s.maxDuration:
			tn.end(tunnelDuration)
			return
		case quiet >= s.idle:
			tn.end(tunnelIdle)
			return
		}
		timer.Reset(min(s.maxDuration-now, s.idle-quiet))
	}
}

// end closes the tunnel for reason, once. At a bound the client's
// connection is cut too: the proxy may be blocked reading from the client,
// or writing to one that reads nothing, where closing the upstream side
// alone would not reach it.
func (tn *tunnel) end(reason string) error {
	err := net.ErrClosed
	tn.once.Do(func() {
		tn.ended.Store(true)
		close(tn.done)
		tn.set.open.Dec()
		tn.set.closed[reason].Inc()
		if reason != tunnelClosed && tn.client != nil {
			past := time.Unix(1, 0)
			tn.client.SetReadDeadline(past)
			tn.client.SetWriteDeadline(past)
		}
		err = tn.rwc.Close()
	})
	return err
}

// Read reads what the upstream sends to the client.
func (tn *tunnel) Read(p []byte) (int, error) {
	if tn.ended.Load() {
		return 0, net.ErrClosed
	}
	left := tn.set.maxBytes - tn.used.Load()
	if left <= 0 {
		tn.end(tunnelBytes)
		return 0, errTunnelBytes
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := tn.rwc.Read(p)
	if n > 0 {
		tn.last.Store(int64(time.Since(tn.start)))
		// A write the other way may have used the allowance meanwhile.
		if over := tn.used.Add(int64(n)) - tn.set.maxBytes; over > 0 {
			n -= int(min(over, int64(n)))
			tn.end(tunnelBytes)
			if err == nil {
				err = errTunnelBytes
			}
		}
	}
	return n, err
}

// Write writes what the client sends to the upstream.
func (tn *tunnel) Write(p []byte) (int, error) {
	if tn.ended.Load() {
		return 0, net.ErrClosed
	}
	allowed := len(p)
	if over := tn.used.Add(int64(len(p))) - tn.set.maxBytes; over > 0 {
		allowed -= int(min(over, int64(len(p))))
	}
	n, err := tn.rwc.Write(p[:allowed])
	if n > 0 {
		tn.last.Store(int64(time.Since(tn.start)))
	}
	if allowed < len(p) {
		tn.end(tunnelBytes)
		if err == nil {
			err = errTunnelBytes
		}
	}
	return n, err
}

// Close ends the tunnel, when the proxy is done copying.
func (tn *tunnel) Close() error { return tn.end(tunnelClosed) }
