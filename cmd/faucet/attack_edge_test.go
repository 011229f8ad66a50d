package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/pgstore"
	"github.com/faucetgo/faucet/pgstore/pgtest"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// Attacks on the surfaces of delay mode, in-flight limits and adaptive
// rates: a request's shape, a flood or a slow store must not switch the
// limiter off.

// keyedGet sends GET url with X-Key key on a connection of its own, bound
// by ctx, and returns its outcome.
func keyedGet(ctx context.Context, client *http.Client, url, key string) outcome {
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	r.Header.Set("X-Key", key)
	a := outcome{start: time.Now()}
	resp, err := client.Do(r)
	a.end = time.Now()
	if err != nil {
		a.err = err
		return a
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a.status, a.reason, a.retryAfter = resp.StatusCode, resp.Header.Get("X-Faucet-Reason"), resp.Header.Get("Retry-After")
	return a
}

// waitingRules park the requests on /wait/ for 10 s a key (max_delay
// 15 s); /fast/ is under a rule that never waits.
const waitingRules = `{"rules":[
  {"name":"parked","match":{"path_prefix":"/wait/"},"limit_keys":["header:X-Key"],
   "algorithm_config":{"rps":0.1,"burst":1},"delay":{"max_delay":"15s"}},
  {"name":"open","match":{"path_prefix":"/fast/"},"limit_keys":["ip:address"],
   "algorithm_config":{"rps":10000,"burst":10000}}]}`

// 250 keys, each one request that would wait 10 s, at --max-waiting 100:
// at most 100 wait, the other 150 get 429 delay_full at once; /healthz and
// a rule that does not wait answer promptly meanwhile; the waiters cost
// serve a bounded memory, and once their clients leave (or, on fasthttp,
// once their turns came) nobody waits.
func TestAttackEdgeWaitingFlood(t *testing.T) {
	skipShort(t)
	const keys, maxWaiting = 250, 100
	up := newTestUpstream(t, 0)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, waitingRules)
	p := startServe(t, "--rules", rules, "--upstream", up.URL, "--max-conns", "600",
		"--max-waiting", fmt.Sprint(maxWaiting), "--write-timeout", "30s", "--upstream-timeout", "5s")

	// Each key spends its burst: its next request waits 10 s.
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Go(func() {
			for k := w; k < keys; k += 10 {
				if a := keyedGet(context.Background(), testClient, p.url("/wait/prime"), fmt.Sprint("k", k)); a.err != nil || a.status != http.StatusOK {
					t.Errorf("priming key %d: %d, %v; want 200 (its burst)", k, a.status, a.err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	rssBefore := rssKiB(t, p.cmd.Process.Pid)

	// The most faucet_delay_waiting showed while the flood went on.
	var most atomic.Int64
	sampling, stopSampling := context.WithCancel(context.Background())
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for sampling.Err() == nil {
			if v := int64(metric(t, p, "faucet_delay_waiting")); v > most.Load() {
				most.Store(v)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	defer func() { stopSampling(); sampler.Wait() }()

	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	out := make([]outcome, keys)
	var answered atomic.Int64
	var flood sync.WaitGroup
	client := burstClient(30 * time.Second)
	for k := range keys {
		flood.Go(func() {
			out[k] = keyedGet(ctx, client, p.url("/wait/flood"), fmt.Sprint("k", k))
			if out[k].err == nil {
				answered.Add(1)
			}
		})
	}
	// The denials come at once; 10 s is a loaded machine's margin, and
	// still before the first turn.
	for deadline := time.Now().Add(8 * time.Second); answered.Load() < keys-maxWaiting && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if n := answered.Load(); n < keys-maxWaiting {
		t.Errorf("%d of %d requests answered within 8 s, want at least the %d beyond --max-waiting, denied at once", n, keys, keys-maxWaiting)
	}
	waiting := pollMetric(t, p, "faucet_delay_waiting", func(v float64) bool { return v == maxWaiting })
	if waiting < maxWaiting/2 {
		t.Errorf("faucet_delay_waiting %v during the flood, want about --max-waiting %d: the attack did not park them", waiting, maxWaiting)
	}

	// Requests that do not wait are served while the others are parked.
	for i := range 5 {
		for _, path := range []string{"/healthz", "/fast/x"} {
			start := time.Now()
			resp, _ := get(t, p.url(path))
			if took := time.Since(start); resp.StatusCode != http.StatusOK || took > 3*time.Second {
				t.Errorf("%s (%d) while %v requests wait: %d after %v, want 200 within 3 s", path, i, waiting, resp.StatusCode, took)
			}
		}
	}
	rssParked := rssKiB(t, p.cmd.Process.Pid)

	// The clients leave; on fasthttp the waiters sit out their turns.
	leave()
	flood.Wait()
	stopSampling()
	sampler.Wait()

	denied := 0
	for k, a := range out {
		if a.err != nil || a.status == http.StatusOK {
			continue // a waiter: its client left, or its turn came
		}
		if a.status != http.StatusTooManyRequests || a.reason != "delay_full" {
			t.Errorf("key %d: %d, reason %q; want 200 after a wait, or 429 delay_full", k, a.status, a.reason)
			continue
		}
		denied++
		if took := a.end.Sub(a.start); took > 5*time.Second {
			t.Errorf("key %d: 429 delay_full after %v, want it at once (the turn was 10 s away)", k, took)
		}
	}
	if m := most.Load(); m > maxWaiting || denied < keys-maxWaiting {
		t.Errorf("at most %d waiting at once, %d denied delay_full; want at most --max-waiting %d, and the other %d denied",
			m, denied, maxWaiting, keys-maxWaiting)
	}
	grew := rssParked - rssBefore
	t.Logf("VmRSS %d KiB before the flood, %d KiB with %v waiting: %.1f KiB a waiter", rssBefore, rssParked, waiting, float64(grew)/maxWaiting)
	if grew > maxWaiting*256 {
		t.Errorf("%v waiting requests grew serve by %d KiB, want at most 256 KiB each", waiting, grew)
	}
	wait := func(v float64) bool { return v == 0 }
	if v := pollMetric(t, p, "faucet_delay_waiting", wait); v != 0 {
		if v = pollMetric(t, p, "faucet_delay_waiting", wait); v != 0 {
			t.Errorf("faucet_delay_waiting %v after the clients left, want 0", v)
		}
	}
	if v := metric(t, p, "faucet_delay_full_total"); v < keys-maxWaiting {
		t.Errorf("faucet_delay_full_total %v, want at least %d", v, keys-maxWaiting)
	}
}

// keyFloodRules give each X-Key one request in flight.
const keyFloodRules = `{"rules":[{"name":"one","limit_keys":["header:X-Key"],"algorithm":"concurrency",
  "algorithm_config":{"max_in_flight":1}}]}`

// Four rounds of 800 distinct keys, 4 KiB each, every one with a request
// held at a slow upstream, then released: faucet_in_flight returns to 0,
// and the Go heap after the last three to its level after the first (what
// 800 connections leave in pools and buffers): the 2,400 keys of those
// three held 9.4 MiB, which a table that kept an entry per key would keep.
func TestAttackEdgeInFlightKeyFlood(t *testing.T) {
	skipShort(t)
	const rounds, perRound = 4, 800
	up := newTestUpstream(t, 1500*time.Millisecond)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, keyFloodRules)
	// A low GOGC keeps the heap near what is live, so that a leak shows.
	t.Setenv("GOGC", "10")
	p := startServe(t, "--rules", rules, "--upstream", up.URL, "--max-conns", "2000", "--upstream-timeout", "5s", "--write-timeout", "10s")
	heap := func() float64 { return metric(t, p, "go_memstats_heap_inuse_bytes") }
	pad := strings.Repeat("k", 4096)
	client := burstClient(20 * time.Second)
	// settle returns the least heap in use over 20 × 20 requests, which
	// allocate and so run the collector.
	settle := func() float64 {
		least := heap()
		for range 20 {
			for range 20 {
				resp, _ := get(t, p.url("/healthz"))
				resp.Body.Close()
			}
			least = min(least, heap())
		}
		return least
	}

	var base, peak float64
	for round := range rounds {
		var held sync.WaitGroup
		var ok, other atomic.Int64
		for k := range perRound {
			held.Go(func() {
				a := keyedGet(context.Background(), client, p.url("/hold"), fmt.Sprint(round, "-", k, pad))
				if a.err == nil && a.status == http.StatusOK {
					ok.Add(1)
				} else if other.Add(1) == 1 {
					t.Errorf("round %d, key %d: %d %q, %v; want 200 (every key has its own slot)", round, k, a.status, a.reason, a.err)
				}
			})
		}
		if v := pollMetric(t, p, `faucet_in_flight{rule="one"}`, func(v float64) bool { return v >= perRound/2 }); v < perRound/2 {
			t.Errorf("round %d: faucet_in_flight %v while the upstream holds the requests, want most of %d", round, v, perRound)
		}
		peak = max(peak, heap())
		held.Wait()
		if ok.Load() < perRound*9/10 {
			t.Errorf("round %d: %d of %d admitted, want nearly all", round, ok.Load(), perRound)
		}
		if round == 0 {
			base = settle()
		}
	}
	if v := pollMetric(t, p, `faucet_in_flight{rule="one"}`, func(v float64) bool { return v == 0 }); v != 0 {
		t.Errorf("faucet_in_flight %v after every request ended, want 0", v)
	}
	after := settle()
	t.Logf("heap in use: %.1f MiB after the first round, %.1f MiB at a peak, %.1f MiB after %d keys more", base/(1<<20), peak/(1<<20), after/(1<<20), (rounds-1)*perRound)
	if after > base+3<<20 {
		t.Errorf("heap in use %.1f MiB after the keys' requests ended, want within 3 MiB of the %.1f MiB after the first round", after/(1<<20), base/(1<<20))
	}
}

// bigUpstream answers /big with 64 MiB, more than loopback buffers hold,
// and anything else with "ok".
func bigUpstream(t *testing.T) *httptest.Server {
	chunk := make([]byte, 1<<20)
	u := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(64<<20))
		for range 64 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// Clients that send a request for a large response and then read it
// slowly, or not at all, hold their key's slot at most until
// --write-timeout (3 s): meanwhile another key is served, and afterwards
// the key's slot is free again.
func TestAttackEdgeSlowReaderHoldsSlot(t *testing.T) {
	up := bigUpstream(t)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, keyFloodRules)
	p := startServe(t, "--rules", rules, "--upstream", up.URL, "--upstream-timeout", "1s", "--write-timeout", "3s")
	inFlight := `faucet_in_flight{rule="one"}`

	type reader struct {
		key  string
		read func(c net.Conn) // how it reads the response
	}
	readers := []reader{
		{"never", func(c net.Conn) { time.Sleep(15 * time.Second) }},
		{"slow", func(c net.Conn) { // 1 KiB each 100 ms: 10 KiB/s
			buf := make([]byte, 1024)
			for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}},
	}
	sent := time.Now()
	var wg sync.WaitGroup
	for _, r := range readers {
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(4096)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "GET /big HTTP/1.1\r\nHost: faucet\r\nX-Key: %s\r\n\r\n", r.key)
		wg.Go(func() { r.read(c) })
	}
	if v := pollMetric(t, p, inFlight, func(v float64) bool { return v == 2 }); v != 2 {
		t.Fatalf("%s %v with both slow readers' responses under way, want 2", inFlight, v)
	}
	for _, r := range readers {
		if resp, _ := get(t, p.url("/small"), "X-Key", r.key); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("key %q while its slow reader holds the slot: %d, want 429", r.key, resp.StatusCode)
		}
	}
	for i := range 5 {
		start := time.Now()
		if resp, _ := get(t, p.url("/small"), "X-Key", fmt.Sprint("other", i)); resp.StatusCode != http.StatusOK || time.Since(start) > 2*time.Second {
			t.Errorf("another key while the slow readers hold theirs: %d after %v, want 200 within 2 s", resp.StatusCode, time.Since(start))
		}
	}
	// At --write-timeout (3 s) the responses are cut and the slots freed;
	// 8 s is the margin of a loaded machine, and well before the 15 s the
	// readers would take.
	if v := pollMetric(t, p, inFlight, func(v float64) bool { return v == 0 }); v != 0 || time.Since(sent) > 11*time.Second {
		t.Errorf("%s %v %v after the slow readers sent their requests, want 0 within --write-timeout 3s and a margin", inFlight, v, time.Since(sent).Round(time.Millisecond))
	}
	for _, r := range readers {
		if resp, _ := get(t, p.url("/small"), "X-Key", r.key); resp.StatusCode != http.StatusOK {
			t.Errorf("key %q after --write-timeout: %d, want 200 (its slot free again)", r.key, resp.StatusCode)
		}
	}
}

// stallRules: an in-flight limit of 5 on one key, falling back to this
// instance's share, and one of 5 that fails closed.
const stallRules = `{"rules":[
  {"name":"closed","match":{"path_prefix":"/closed/"},"limit_keys":["global"],"algorithm":"concurrency",
   "algorithm_config":{"max_in_flight":5},"fail_mode":"closed"},
  {"name":"share","limit_keys":["global"],"algorithm":"concurrency","algorithm_config":{"max_in_flight":5}}]}`

// The shared store of in-flight slots stalls (redis-server stopped with
// SIGSTOP; PostgreSQL's slot table locked by another session): requests
// under an in-flight limit are answered within about the store's timeout,
// by the fallback's share or 503 for fail_mode closed, never hang; once
// the store answers again, 5 at once pass: the slots held as it stalled,
// and those that acquires timed out on, were given back, not left to
// expire a TTL (30 s) later.
func TestAttackEdgeStalledSlotStore(t *testing.T) {
	skipShort(t)
	for _, store := range []string{"redis", "postgres"} {
		t.Run("store="+store, func(t *testing.T) {
			var args []string
			var stall func(d time.Duration) // stalls the store for d, in the background
			switch store {
			case "redis":
				r := redistest.Start(t)
				args = []string{"--redis", r.Addr(), "--redis-timeout", "500ms"}
				stall = func(d time.Duration) {
					if err := r.Signal(syscall.SIGSTOP); err != nil {
						t.Fatal(err)
					}
					time.AfterFunc(d, func() { r.Signal(syscall.SIGCONT) })
				}
			case "postgres":
				srv := pgtest.Start(t)
				dsn := srv.DSN()
				args = []string{"--postgres", dsn, "--postgres-install", "--postgres-timeout", "500ms"}
				stall = func(d time.Duration) {
					locked := make(chan struct{})
					go func() {
						sql := fmt.Sprintf("BEGIN; LOCK TABLE %s_slots IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(%g); COMMIT", pgstore.DefaultTable, d.Seconds())
						close(locked)
						if err := srv.ExecDSN(dsn, sql); err != nil {
							t.Errorf("locking the slots: %v", err)
						}
					}()
					<-locked
					time.Sleep(300 * time.Millisecond) // the lock is taken
				}
			}
			up := newTestUpstream(t, 100*time.Millisecond)
			rules := filepath.Join(t.TempDir(), "rules.json")
			writeRules(t, rules, stallRules)
			p := startServe(t, append([]string{"--rules", rules, "--upstream", up.URL, "--upstream-timeout", "2s", "--write-timeout", "10s"}, args...)...)
			client := burstClient(15 * time.Second)
			allPass := func(when string) {
				t.Helper()
				for i, a := range together(5, client, p.url("/again")) {
					if a.err != nil || a.status != http.StatusOK {
						t.Errorf("%s, request %d of 5 at once: %d %q, %v; want 200", when, i, a.status, a.reason, a.err)
					}
				}
			}
			allPass("before the stall")
			// Their slots go back to the store in the background, a round
			// trip after their answers: wait for it, or the holders below
			// may find all five still held.
			if v := pollMetric(t, p, `faucet_in_flight{rule="share"}`, func(v float64) bool { return v == 0 }); v != 0 {
				t.Fatalf(`faucet_in_flight{rule="share"} %v after the first requests ended, want 0`, v)
			}

			// Two requests hold slots in the store as it stalls: their
			// upstream answers after 1.8 s (within --upstream-timeout, and
			// long enough for a loaded machine's scrape to see them), and
			// their releases fail.
			up.latency.Store(int64(1800 * time.Millisecond))
			holders := make(chan []outcome, 1)
			go func() { holders <- together(2, client, p.url("/held")) }()
			if v := pollMetric(t, p, `faucet_in_flight{rule="share"}`, func(v float64) bool { return v == 2 }); v != 2 {
				t.Fatalf(`faucet_in_flight{rule="share"} %v with two requests at the upstream, want 2`, v)
			}
			stall(6 * time.Second)
			stalled := time.Now()
			up.latency.Store(int64(100 * time.Millisecond))
			for _, c := range []struct {
				path string
				want int
			}{{"/share", http.StatusOK}, {"/closed/x", http.StatusServiceUnavailable}} {
				got := map[int]int{}
				for i, a := range together(8, client, p.url(c.path)) {
					if took := a.end.Sub(a.start); a.err != nil || took > 4*time.Second {
						t.Errorf("%s, request %d of 8 with the store stalled: %d after %v, %v; want an answer within about the store's timeout (500ms)",
							c.path, i, a.status, took.Round(time.Millisecond), a.err)
						continue
					}
					got[a.status]++
				}
				if got[c.want] == 0 || got[c.want]+got[http.StatusTooManyRequests] != 8 {
					t.Errorf("%s with the store stalled: answers by status %v, want %d (and 429 beyond the share)", c.path, got, c.want)
				}
			}
			for i, a := range <-holders {
				if took := a.end.Sub(a.start); a.err != nil || a.status != http.StatusOK || took > 5*time.Second {
					t.Errorf("request %d holding a slot as the store stalled: %d after %v, %v; want 200, its release bounded",
						i, a.status, took.Round(time.Millisecond), a.err)
				}
			}
			if time.Since(stalled) > 5*time.Second {
				t.Logf("the stalled requests took %v: the store may have come back meanwhile", time.Since(stalled))
			}
			// The store comes back; slots taken before the stall were
			// released, those of the stall were this instance's own.
			time.Sleep(time.Until(stalled.Add(6500 * time.Millisecond)))
			if v := pollMetric(t, p, `faucet_in_flight{rule="share"}`, func(v float64) bool { return v == 0 }); v != 0 {
				t.Errorf(`faucet_in_flight{rule="share"} %v after the stall, want 0`, v)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				ok := 0
				for _, a := range together(5, client, p.url("/again")) {
					if a.err == nil && a.status == http.StatusOK {
						ok++
					}
				}
				if ok == 5 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%d of 5 at once admitted after the store came back, want 5", ok)
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// steerUpstream answers /missing with 404 and /limited with 429, /body
// after reading the request's body, /slowish with 200 after 50 ms (below
// the rule's latency target, but long enough for a client to leave
// first), and anything else with 200 at once.
func steerUpstream(t *testing.T) *httptest.Server {
	u := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
		case "/limited":
			w.WriteHeader(http.StatusTooManyRequests)
		case "/body":
			io.Copy(io.Discard, r.Body)
		case "/slowish":
			select {
			case <-time.After(50 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(u.Close)
	return u
}

// Clients cannot steer an adaptive rate down for everyone: not by leaving
// right after sending (the proxy's cut request is no upstream failure),
// nor by requests the upstream answers 4xx, nor by sending a request's
// body slowly (the upstream's latency is its own, not the client's
// upload). Each attack goes on for 6 s (six steps of the controller)
// beside an honest client, and the rate stays at the rule's 400.
func TestAttackEdgeAdaptiveSteering(t *testing.T) {
	skipShort(t)
	attacks := []struct {
		name    string
		clients int
		least   int64 // requests the attack must send to tell
		send    func(p *proc) bool
	}{
		// A whole request, then the connection closes at once.
		{"leave", 4, 50, func(p *proc) bool {
			c, err := net.DialTimeout("tcp", p.addr, time.Second)
			if err != nil {
				return false
			}
			io.WriteString(c, "GET /slowish HTTP/1.1\r\nHost: faucet\r\n\r\n")
			c.Close()
			time.Sleep(5 * time.Millisecond)
			return true
		}},
		// Paths the upstream answers 404 and 429, slowly enough to leave
		// the honest client most of the samples.
		{"4xx", 2, 50, func(p *proc) bool {
			for _, path := range []string{"/missing", "/limited"} {
				resp, err := testClient.Get(p.url(path))
				if err != nil {
					return false
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return true
		}},
		// A body of 8 KiB at once (what fasthttp reads before the rules
		// run), then 10 bytes more, one a 100 ms, to an upstream that
		// reads the body before it answers: 2% of the responses or more.
		{"slow-body", 8, 16, func(p *proc) bool {
			c, err := net.DialTimeout("tcp", p.addr, time.Second)
			if err != nil {
				return false
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "POST /body HTTP/1.1\r\nHost: faucet\r\nContent-Length: %d\r\n\r\n%s", 8<<10+10, strings.Repeat("x", 8<<10))
			for range 10 {
				time.Sleep(100 * time.Millisecond)
				io.WriteString(c, "x")
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return true
		}},
	}
	for _, at := range attacks {
		t.Run(at.name, func(t *testing.T) {
			up := steerUpstream(t)
			rules := filepath.Join(t.TempDir(), "rules.json")
			writeRules(t, rules, adaptiveRules)
			p := startServe(t, "--rules", rules, "--upstream", up.URL, "--upstream-timeout", "2s", "--write-timeout", "5s")
			rate := `faucet_adaptive_rate{rule="upstream"}`

			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			var sent, honest atomic.Int64
			for range at.clients {
				wg.Go(func() {
					for ctx.Err() == nil {
						if at.send(p) {
							sent.Add(1)
						}
					}
				})
			}
			// The honest client, whose requests the upstream answers at
			// once.
			for range 4 {
				wg.Go(func() {
					for ctx.Err() == nil {
						if resp, err := testClient.Get(p.url("/work")); err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							honest.Add(1)
						}
						time.Sleep(10 * time.Millisecond) // below the rate
					}
				})
			}
			lowest := 400.0
			for ctx.Err() == nil {
				lowest = min(lowest, metric(t, p, rate))
				time.Sleep(200 * time.Millisecond)
			}
			wg.Wait()
			lowest = min(lowest, metric(t, p, rate))
			t.Logf("%d attacking requests, %d honest", sent.Load(), honest.Load())
			if sent.Load() < at.least || honest.Load() < 20 {
				t.Errorf("too little sent to tell: %d attacking requests (want %d), %d honest", sent.Load(), at.least, honest.Load())
			}
			if lowest != 400 {
				t.Errorf("%s fell to %v under the attack, want it at the rule's 400", rate, lowest)
			}
		})
	}
}

// Huge, negative or odd values of the new rule fields are refused at
// start, each in a message naming its field, never with a panic.
func TestAttackEdgeOddFieldValues(t *testing.T) {
	inflight := func(v string) string {
		return `{"rules":[{"name":"r","limit_keys":["ip:address"],"algorithm":"concurrency","algorithm_config":{"max_in_flight":` + v + `}}]}`
	}
	delay := func(field, v string) string {
		d := `"max_delay":"1s"`
		if field == "max_delay" {
			d = `"max_delay":` + v
		} else {
			d += `,"queue":` + v
		}
		return `{"rules":[{"name":"r","limit_keys":["ip:address"],"algorithm_config":{"rps":10,"burst":1},"delay":{` + d + `}}]}`
	}
	adaptive := func(field, v string) string {
		a := map[string]string{"floor": `10`, "latency_target": `"100ms"`}
		a[field] = v
		var parts []string
		for k, v := range a {
			parts = append(parts, `"`+k+`":`+v)
		}
		return `{"rules":[{"name":"r","limit_keys":["global"],"algorithm_config":{"rps":100,"burst":100},"adaptive":{` + strings.Join(parts, ",") + `}}]}`
	}
	cases := []struct{ rules, field string }{}
	for _, v := range []string{"0", "-1", "1000001", "1e300", "1e400", "1.5", `"5"`, "null", "9223372036854775808"} {
		cases = append(cases, struct{ rules, field string }{inflight(v), "max_in_flight"})
	}
	for _, v := range []string{`"0s"`, `"-1s"`, `"1000000h"`, `"9999999999999999999s"`, `""`, `"1"`, `5`, `"NaNs"`} {
		cases = append(cases, struct{ rules, field string }{delay("max_delay", v), "delay.max_delay"})
	}
	for _, v := range []string{"-1", "1e10", "1e400", "0.0001", `"1"`} {
		cases = append(cases, struct{ rules, field string }{delay("queue", v), "delay.queue"})
	}
	for field, vs := range map[string][]string{
		"floor":          {"-1", "0", "1000", "1e308", "1e400"},
		"latency_target": {`"0s"`, `"-5ms"`, `"1000000h"`, `"9999999999999999999s"`, `50`},
		"percentile":     {"-0.5", "1", "1.5", "1e400"}, // 0 is the default
		"error_rate":     {"-0.1", "2", "1e308"},
		"decrease":       {"1", "1.5", "-1", "1e400"}, // 0 is the default
		"increase":       {"-1", "1e308", "1e400"},
	} {
		for _, v := range vs {
			cases = append(cases, struct{ rules, field string }{adaptive(field, v), "adaptive." + field})
		}
	}
	dir := t.TempDir()
	for i, c := range cases {
		rules := filepath.Join(dir, fmt.Sprint("rules", i, ".json"))
		writeRules(t, rules, c.rules)
		code, errs := runServe(t, "--rules", rules, "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--admin-listen", "")
		if strings.Contains(errs, "panic") || strings.Contains(errs, "goroutine ") {
			t.Errorf("%s: serve panicked: %s", c.rules, errs)
			continue
		}
		if code != 2 || !strings.Contains(errs, c.field) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and a message naming %s", c.rules, code, errs, c.field)
		}
	}
}

// reloadRules are the rules of the reload storm: a delay rule and an
// in-flight limit whose values each reload changes.
func reloadRules(i int) string {
	return fmt.Sprintf(`{"rules":[
  {"name":"wait","match":{"path_prefix":"/wait/"},"limit_keys":["header:X-Key"],
   "algorithm_config":{"rps":%d,"burst":1},"delay":{"max_delay":"%dms"}},
  {"name":"hold","limit_keys":["header:X-Key"],"algorithm":"concurrency","algorithm_config":{"max_in_flight":%d}}]}`,
		5+i%5, 1000+100*(i%10), 2+i%4)
}

// Rules reloaded 40 times, 100 ms apart, while requests wait in delay
// mode and hold in-flight slots: no panic, every request answered, and
// afterwards nobody waits, no slot is held, and 2 at once pass again.
func TestAttackEdgeReloadStorm(t *testing.T) {
	skipShort(t)
	up := newTestUpstream(t, 200*time.Millisecond)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, reloadRules(0))
	p := startServe(t, "--rules", rules, "--upstream", up.URL, "--watch", "50ms", "--upstream-timeout", "2s", "--write-timeout", "10s")

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var answered, failed atomic.Int64
	client := burstClient(15 * time.Second)
	for c := range 16 {
		wg.Go(func() {
			path := []string{"/wait/x", "/hold"}[c%2]
			for ctx.Err() == nil {
				a := keyedGet(context.Background(), client, p.url(path), fmt.Sprint("k", c%4))
				switch {
				case a.err != nil:
					if failed.Add(1) == 1 {
						t.Errorf("%s: %v, want an answer", path, a.err)
					}
				case a.status != http.StatusOK && a.status != http.StatusTooManyRequests:
					t.Errorf("%s: %d %q, want 200 or 429", path, a.status, a.reason)
				default:
					answered.Add(1)
				}
			}
		})
	}
	for i := 1; i <= 40; i++ {
		time.Sleep(100 * time.Millisecond)
		writeRules(t, rules, reloadRules(i))
	}
	cancel()
	wg.Wait()
	if answered.Load() < 40 {
		t.Errorf("%d requests answered during the storm, want many", answered.Load())
	}
	if log := p.log(); strings.Contains(log, "panic") {
		t.Fatalf("serve panicked during the reload storm:\n%s", log)
	}
	for _, sample := range []string{"faucet_delay_waiting", `faucet_in_flight{rule="hold"}`} {
		if v := pollMetric(t, p, sample, func(v float64) bool { return v == 0 }); v != 0 {
			t.Errorf("%s %v after the storm, want 0", sample, v)
		}
	}
	// The last rules allow 2 + 40%4 = 2 in flight a key.
	for i, a := range together(2, client, p.url("/hold"), "X-Key", "k0") {
		if a.err != nil || a.status != http.StatusOK {
			t.Errorf("after the storm, request %d of 2 at once: %d %q, %v; want 200", i, a.status, a.reason, a.err)
		}
	}
}

// skipShort skips a long attack under -short: the full suite runs it.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("long attack: run without -short")
	}
}
