package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Attacks on the listeners' connection caps (issue 31, items 4 and 8).

// openRules admit every request the attacks send: the connection cap is
// what they test, not a rule.
const openRules = `{"rules":[{"name":"open","limit_keys":["ip:address"],"algorithm":"token_bucket",
  "algorithm_config":{"rps":10000,"burst":10000}}]}`

// slowUpstream answers every request after d.
func slowUpstream(t *testing.T, d time.Duration) *httptest.Server {
	t.Helper()
	u := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(u.Close)
	return u
}

// startCapped runs faucet serve as a proxy in front of upstream, every
// request admitted, with args.
func startCapped(t *testing.T, upstream string, args ...string) *proc {
	t.Helper()
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, openRules)
	return startServe(t, append([]string{"--rules", rules, "--upstream", upstream}, args...)...)
}

// answer is what one raw connection got for its request.
type answer struct {
	status     int
	retryAfter string
	close      bool
	err        error // the connection ended without a response
}

// rawGets opens n connections to addr at once, sends a whole GET on each,
// and reads each one's answer within timeout.
func rawGets(addr string, n int, timeout time.Duration) []answer {
	out := make([]answer, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, timeout)
			if err != nil {
				out[i].err = err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(timeout))
			if _, err := fmt.Fprintf(c, "GET /slow/%d HTTP/1.1\r\nHost: faucet\r\n\r\n", i); err != nil {
				out[i].err = err
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				out[i].err = err
				return
			}
			resp.Body.Close()
			out[i] = answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), close: resp.Close}
		})
	}
	wg.Wait()
	return out
}

// At --max-conns 100, 150 new connections each send a whole request to a
// proxy whose upstream takes 3 s: every request is answered. The old cap
// took a connection whose request had arrived but was not read yet for a
// quiet one and closed it to make room (46 of 150 closed unanswered).
func TestAttackConnectionCapDropsNoRequest(t *testing.T) {
	up := slowUpstream(t, 3*time.Second)
	p := startCapped(t, up.URL, "--max-conns", "100")
	got := rawGets(p.addr, 150, 20*time.Second)
	codes := map[int]int{}
	unanswered := 0
	var firstErr error
	for _, a := range got {
		if a.err != nil {
			unanswered++
			firstErr = a.err
			continue
		}
		codes[a.status]++
	}
	if unanswered > 0 {
		t.Errorf("%d of 150 requests closed unanswered (first: %v), want 0", unanswered, firstErr)
	}
	if codes[200] != 150 {
		t.Errorf("answers by status %v, want 150 × 200: every one waits for a slot within --read-header-timeout", codes)
	}
}

// At the cap, with every connection busy, a client that found no place
// gets 503 with Retry-After and Connection: close, not a reset: the 64 that
// wait once --read-header-timeout has passed, the ones beyond at once.
func TestAttackConnectionCapRefusesWith503(t *testing.T) {
	up := slowUpstream(t, 4*time.Second)
	p := startCapped(t, up.URL, "--max-conns", "10", "--read-header-timeout", "1s")
	busy := make(chan []answer, 1)
	go func() { busy <- rawGets(p.addr, 10, 20*time.Second) }()
	// The ten take every slot before the others come.
	for deadline := time.Now().Add(10 * time.Second); metric(t, p, `faucet_connections_open{listener="public"}`) < 10; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the ten busy connections did not open within 10 s")
		}
	}
	got := rawGets(p.addr, 80, 10*time.Second)
	refused, served, unanswered := 0, 0, 0
	for i, a := range got {
		switch {
		case a.err != nil:
			if unanswered++; unanswered == 1 {
				t.Errorf("connection %d: %v, want an answer", i, a.err)
			}
		case a.status == 503:
			refused++
			if ra, err := strconv.Atoi(a.retryAfter); err != nil || ra < 1 || !a.close {
				t.Errorf("connection %d: 503 with Retry-After %q, Connection: close %v; want both", i, a.retryAfter, a.close)
			}
		case a.status == 200:
			served++ // a slot came free within the wait
		default:
			t.Errorf("connection %d: status %d, want 503", i, a.status)
		}
	}
	if refused < 70 || unanswered > 0 {
		t.Errorf("of 80: %d refused with 503, %d served, %d closed unanswered; want most refused, none unanswered", refused, served, unanswered)
	}
	for i, a := range <-busy {
		if a.err != nil || a.status != 200 {
			t.Errorf("busy connection %d: %d %v, want 200", i, a.status, a.err)
		}
	}
	if n := metric(t, p, `faucet_connections_rejected_total{listener="public"}`); n != float64(refused) {
		t.Errorf("faucet_connections_rejected_total %v, want %d", n, refused)
	}
}

// openFDs counts the descriptors process pid has open.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return len(ents)
}

// procStatus reads field (such as VmRSS) of /proc/PID/status.
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return ""
}
