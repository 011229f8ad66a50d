package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Attacks on the rate-limit service's listener (issue 31, items 3 and 4):
// connections and streams that say nothing.

const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// silentCalls opens one connection to addr and starts n calls of method
// on it that never send their request message, as fast as it can write
// them. The connection stays open until the test ends; what
// the server sends is read and dropped.
func silentCalls(t *testing.T, addr, method string, n int) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go io.Copy(io.Discard, c)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := hb.Bytes()
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	for i := range n {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndHeaders: true}); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	return c
}

// goroutines reads go_goroutines from p's metrics.
func goroutines(t *testing.T, p *proc) float64 {
	t.Helper()
	n := metric(t, p, "go_goroutines")
	if n < 0 {
		t.Fatal("no go_goroutines in the metrics")
	}
	return n
}

// One connection starting 20,000 calls that never send their message holds
// at most --rls-max-streams (100) of them, and those end at --read-timeout,
// as do streams (health Watch) whose first message does not come. Without
// the bounds each held a goroutine until the connection closed: 20,000
// goroutines.
func TestAttackRLSSilentStreams(t *testing.T) {
	p, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge}, "--read-timeout", "4s", "--read-header-timeout", "1s")
	base := goroutines(t, p)
	// The streams first, so that both groups are in flight together
	// however long a busy server takes over the 20,000 headers.
	silentCalls(t, addr, "/grpc.health.v1.Health/Watch", 100)
	silentCalls(t, addr, shouldRateLimit, 20_000)
	// Wait for the server to hold most of the calls it admits (200; a
	// scrape may miss a few starting or ending), then watch for more.
	peak := 0.0
	for deadline := time.Now().Add(10 * time.Second); peak < base+180; time.Sleep(50 * time.Millisecond) {
		peak = max(peak, goroutines(t, p))
		if time.Now().After(deadline) {
			t.Fatalf("%v goroutines 10 s after the silent calls began, %v before: the calls did not start", peak, base)
		}
	}
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		peak = max(peak, goroutines(t, p))
	}
	if peak > base+500 {
		t.Errorf("%v goroutines with 20,000 silent calls on one connection and 100 on another, %v before: want at most twice --rls-max-streams more", peak, base)
	}
	// The calls admitted end at --read-timeout; the connection stays.
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := goroutines(t, p)
		if n <= base+20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v goroutines 15 s after the peak, %v before: want the calls ended at --read-timeout (4s)", n, base)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rssKiB reads the resident memory of process pid in KiB.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	v := strings.TrimSuffix(procStatus(t, pid, "VmRSS"), " kB")
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("VmRSS %q: %v", v, err)
	}
	return n
}

// The memory one connection holds at the stream cap: 100 silent calls
// grow the process's resident memory by about 3 MiB (2.8 to 3.1 MiB in
// runs, some 30 KiB a call: its goroutine, stream and buffers). The bound
// asserted is generous, as the process's memory moves on its own.
func TestAttackRLSMemoryAtTheStreamCap(t *testing.T) {
	p, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge}, "--read-timeout", "20s")
	pid := p.cmd.Process.Pid
	base := goroutines(t, p) // a scrape first, so its own memory is in the baseline
	before := rssKiB(t, pid)
	silentCalls(t, addr, shouldRateLimit, 100)
	for deadline := time.Now().Add(10 * time.Second); goroutines(t, p) < base+90; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the 100 calls did not start within 10 s: %v goroutines, %v before", goroutines(t, p), base)
		}
	}
	time.Sleep(200 * time.Millisecond) // for the last few to start
	after := rssKiB(t, pid)
	t.Logf("one connection with 100 silent calls: VmRSS %d KiB before, %d KiB after (+%d KiB)", before, after, after-before)
	if after-before > 16<<10 {
		t.Errorf("one connection at the stream cap grew the process by %d KiB, want at most 16 MiB", after-before)
	}
}

// 1,000 connections that send the HTTP/2 preface and nothing more hold at
// most --max-conns descriptors, and a real client is still served. Without
// a cap on the listener each held one: about 1,000 open files.
func TestAttackRLSConnectionFlood(t *testing.T) {
	p, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge}, "--max-conns", "100")
	pid := p.cmd.Process.Pid
	base := openFDs(t, pid)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	peak := 0
	for i := range 1000 {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		io.WriteString(c, http2.ClientPreface)
		if i%100 == 99 {
			peak = max(peak, openFDs(t, pid))
		}
	}
	time.Sleep(500 * time.Millisecond)
	peak = max(peak, openFDs(t, pid))
	t.Logf("descriptors open: %d before, %d at the peak of 1,000 silent connections", base, peak)
	// The cap, the connections waiting for a slot, and a margin for ones
	// being refused or evicted at the moment of counting.
	if limit := base + 100 + 64 + 50; peak > limit {
		t.Errorf("%d descriptors open at the peak of 1,000 silent connections, %d before; want at most %d", peak, base, limit)
	}
	client, _ := rlsClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// Its first connection may be refused while 64 wait: it retries.
	if _, err := client.ShouldRateLimit(ctx, edgeRequest("203.0.113.1"), grpc.WaitForReady(true)); err != nil {
		t.Errorf("a real client during the flood: %v", err)
	}
}

// Streams that send their one message and then last (health Watch) hold
// at most 100 streaming calls over all connections, apart from
// --rls-max-calls, and do not keep their connections busy for the
// connection cap: 150 of them on --max-conns connections leave a new
// connection's ShouldRateLimit served. Without those bounds the streams
// held every connection slot and the whole unary budget, and Envoy was
// locked out (it then admits every request).
func TestAttackRLSLongStreams(t *testing.T) {
	const conns, perConn = 10, 15
	_, addr, _ := startRLSServe(t, map[string]string{"edge.yaml": rlsEdge},
		"--max-conns", strconv.Itoa(conns), "--rls-max-calls", "100", "--read-header-timeout", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	var hcs []healthpb.HealthClient
	for range conns {
		_, hc := rlsClient(t, addr)
		hcs = append(hcs, hc)
	}
	// Round robin, so that every connection carries lasting streams.
	served, refused := 0, 0
	for range perConn {
		for _, hc := range hcs {
			w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = w.Recv()
			}
			switch status.Code(err) {
			case codes.OK:
				served++
			case codes.ResourceExhausted:
				refused++
			default:
				t.Fatalf("a Watch: %v", err)
			}
		}
	}
	t.Logf("%d Watch streams lasting on %d connections, %d refused", served, conns, refused)
	if served > 100 || refused < conns*perConn-100 {
		t.Errorf("%d Watch streams lasting, %d refused; want at most 100 lasting, the rest RESOURCE_EXHAUSTED", served, refused)
	}
	client, _ := rlsClient(t, addr)
	ctx2, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if _, err := client.ShouldRateLimit(ctx2, edgeRequest("203.0.113.1"), grpc.WaitForReady(true)); err != nil {
		t.Errorf("ShouldRateLimit on a new connection while %d Watch streams last: %v", served, err)
	}
}

// The stream and call caps take a range, and only with --rls.
func TestRLSCapFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--rls", "127.0.0.1:0", "--rls-config", dir, "--rls-max-streams", "0"}, "--rls-max-streams: must be from 1 to 10000, got 0"},
		{[]string{"--rls", "127.0.0.1:0", "--rls-config", dir, "--rls-max-calls", "-5"}, "--rls-max-calls: must be from 1 to 1000000, got -5"},
		{[]string{"--rls-max-calls", "5"}, "--rls-max-streams, --rls-max-calls: only mean something with --rls"},
		{[]string{"--rls", "127.0.0.1:0", "--rls-config", dir, "--rls-shadow-headers"}, "--rls-shadow-headers: only means something with --rls-headers"},
	} {
		code, _, errs := runArgs(append([]string{"serve", "--validate"}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.msg) {
			t.Errorf("faucet serve %q: exit %d, %q; want exit 2 and %q", tt.args, code, errs, tt.msg)
		}
	}
}
