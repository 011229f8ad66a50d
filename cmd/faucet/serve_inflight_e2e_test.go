package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upstreamMode is what a testUpstream does with a request.
type upstreamMode int32

const (
	upstreamSlow upstreamMode = iota // answers 200 after its latency
	upstreamFail                     // answers 500 after its latency
	upstreamHang                     // never answers: the client or serve gives up
)

// testUpstream is an upstream on loopback whose latency and failures a
// test controls, and which counts the requests it holds at once.
type testUpstream struct {
	*httptest.Server
	latency  atomic.Int64 // time.Duration
	mode     atomic.Int32 // upstreamMode
	now, max atomic.Int64 // requests held now, and the most at once
	mu       sync.Mutex
	arrivals []time.Time // guarded by mu
}

func newTestUpstream(t *testing.T, latency time.Duration) *testUpstream {
	u := &testUpstream{}
	u.latency.Store(int64(latency))
	release := make(chan struct{})
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := u.now.Add(1)
		defer u.now.Add(-1)
		for m := u.max.Load(); n > m && !u.max.CompareAndSwap(m, n); m = u.max.Load() {
		}
		u.mu.Lock()
		u.arrivals = append(u.arrivals, time.Now())
		u.mu.Unlock()
		wait := time.Duration(u.latency.Load())
		if upstreamMode(u.mode.Load()) == upstreamHang {
			wait = 30 * time.Second
		}
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		case <-release:
			return
		}
		if upstreamMode(u.mode.Load()) == upstreamFail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(u.Close)
	t.Cleanup(func() { close(release) }) // first: Close waits for the handlers
	return u
}

// times returns the arrivals so far, and forgets them.
func (u *testUpstream) times() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.arrivals
	u.arrivals = nil
	return out
}

// burstClient makes every request on a connection of its own: the
// concurrent clients of a test are as many clients.
func burstClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

// outcome is one client's result.
type outcome struct {
	status             int
	reason, retryAfter string
	err                error
	start, end         time.Time
}

// together sends n requests for url at once (each after the same start
// signal) with the headers given, and returns their answers.
func together(n int, client *http.Client, url string, headers ...string) []outcome {
	out := make([]outcome, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		ready.Add(1)
		done.Go(func() {
			r, _ := http.NewRequest(http.MethodGet, url, nil)
			for j := 0; j+1 < len(headers); j += 2 {
				r.Header.Set(headers[j], headers[j+1])
			}
			ready.Done()
			<-start
			a := &out[i]
			a.start = time.Now()
			resp, err := client.Do(r)
			a.end = time.Now()
			if err != nil {
				a.err = err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			a.status, a.reason, a.retryAfter = resp.StatusCode, resp.Header.Get("X-Faucet-Reason"), resp.Header.Get("Retry-After")
		})
	}
	ready.Wait()
	close(start)
	done.Wait()
	return out
}

// pollMetric polls p's metric sample until ok accepts it, for at most
// 15 s, and returns the last value read.
func pollMetric(t *testing.T, p *proc, sample string, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v := metric(t, p, sample)
		if ok(v) || time.Now().After(deadline) {
			return v
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const inFlightRules = `{"rules":[{"name":"conc","limit_keys":["ip:address"],"algorithm":"concurrency",
  "algorithm_config":{"max_in_flight":5}}]}`

// An in-flight limit of 5 in front of a slow upstream: the upstream never
// holds more than 5 requests, the others get 429 concurrency_exceeded with
// a Retry-After; failures of the upstream (500, a hang cut by
// --upstream-timeout) and clients that leave mid-request give their slots
// back, so that 5 slow requests pass at once again afterwards.
func TestServeInFlightLimit(t *testing.T) {
	up := newTestUpstream(t, 100*time.Millisecond)
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, inFlightRules)
	p := startServe(t, "--rules", rules, "--upstream", up.URL, "--upstream-timeout", "1s", "--write-timeout", "5s")
	client := burstClient(20 * time.Second)
	inFlight := `faucet_in_flight{rule="conc"}`

	admitted := 0
	for round := range 3 {
		for i, a := range together(64, client, p.url("/slow")) {
			switch {
			case a.err != nil:
				t.Fatalf("round %d, client %d: %v", round, i, a.err)
			case a.status == http.StatusOK:
				admitted++
			case a.status != http.StatusTooManyRequests || a.reason != "concurrency_exceeded" || a.retryAfter == "":
				t.Errorf("round %d, client %d: %d, reason %q, Retry-After %q; want 200, or 429 concurrency_exceeded with a Retry-After",
					round, i, a.status, a.reason, a.retryAfter)
			}
		}
	}
	if m := up.max.Load(); m > 5 || m < 1 || admitted < 5 {
		t.Errorf("the upstream held %d requests at once, %d admitted in all; want at most 5, and at least 5 admitted", m, admitted)
	}

	// The upstream fails: 500s, then a hang that --upstream-timeout cuts.
	up.mode.Store(int32(upstreamFail))
	for _, a := range together(32, client, p.url("/fail")) {
		if a.err != nil || (a.status != http.StatusInternalServerError && a.status != http.StatusTooManyRequests) {
			t.Errorf("failing upstream: %d, %v; want 500 or 429", a.status, a.err)
		}
	}
	// The 500s were answered before their slots were given back.
	if v := pollMetric(t, p, inFlight, func(v float64) bool { return v == 0 }); v != 0 {
		t.Fatalf("%s %v after the 500s, want 0", inFlight, v)
	}
	up.mode.Store(int32(upstreamHang))
	hung := 0
	for _, a := range together(16, client, p.url("/hang")) {
		switch {
		case a.err != nil || (a.status != http.StatusGatewayTimeout && a.status != http.StatusTooManyRequests):
			t.Errorf("hung upstream: %d, %v; want 504 or 429", a.status, a.err)
		case a.status == http.StatusGatewayTimeout:
			hung++
		}
	}
	if hung < 1 || hung > 5 {
		t.Errorf("hung upstream: %d answered 504, want 1 to 5 (the slots)", hung)
	}

	// Clients that leave mid-request, while the upstream takes its time.
	up.mode.Store(int32(upstreamSlow))
	up.latency.Store(int64(time.Second))
	for _, a := range together(16, burstClient(200*time.Millisecond), p.url("/leave")) {
		if a.err == nil && a.status != http.StatusTooManyRequests {
			t.Errorf("client that left: %d; want no outcome, or 429", a.status)
		}
	}

	// Nothing leaked: the slots come back once the upstream let go.
	if v := pollMetric(t, p, inFlight, func(v float64) bool { return v == 0 }); v != 0 {
		t.Fatalf("%s %v after every request ended, want 0", inFlight, v)
	}
	up.latency.Store(int64(100 * time.Millisecond))
	up.max.Store(0)
	for i, a := range together(5, client, p.url("/again")) {
		if a.err != nil || a.status != http.StatusOK {
			t.Errorf("afterwards, request %d of 5 at once: %d, reason %q, %v; want 200", i, a.status, a.reason, a.err)
		}
	}
	if v := metric(t, p, inFlight); v != 0 {
		t.Errorf("%s %v at the end, want 0", inFlight, v)
	}
	if v := metric(t, p, `faucet_decisions_total{result="denied",rule="conc"}`); v < 1 {
		t.Errorf(`faucet_decisions_total{result="denied",rule="conc"} %v, want the 429s counted`, v)
	}
}

// Two instances on one shared store (Redis, then PostgreSQL), 64 clients
// spread over both, in front of a slow upstream: the upstream never holds
// more than the limit of 5, and every slot comes back.
func TestServeInFlightShared(t *testing.T) {
	for _, name := range []string{"redis", "postgres"} {
		t.Run("store="+name, func(t *testing.T) {
			st := newSharedStore(t, name)
			up := newTestUpstream(t, 100*time.Millisecond)
			rules := filepath.Join(t.TempDir(), "rules.json")
			writeRules(t, rules, inFlightRules)
			var ps []*proc
			// Exactness holds while the store answers: a generous timeout
			// keeps a loaded machine's store from failing over to the
			// fallback's share.
			timeout := "--" + name + "-timeout"
			for range 2 {
				args := append([]string{"--rules", rules, "--upstream", up.URL, "--upstream-timeout", "2s", "--write-timeout", "10s", timeout, "5s"}, st.args...)
				ps = append(ps, startServe(t, args...))
			}
			client := burstClient(20 * time.Second)
			var wg sync.WaitGroup
			var admitted, denied atomic.Int64
			for i := range 64 {
				wg.Go(func() {
					for range 3 {
						resp, err := client.Get(ps[i%2].url("/slow"))
						if err != nil {
							t.Errorf("client %d: %v", i, err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						switch {
						case resp.StatusCode == http.StatusOK:
							admitted.Add(1)
						case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("X-Faucet-Reason") == "concurrency_exceeded":
							denied.Add(1)
						default:
							t.Errorf("client %d: %d %q", i, resp.StatusCode, resp.Header.Get("X-Faucet-Reason"))
						}
					}
				})
			}
			wg.Wait()
			if m := up.max.Load(); m > 5 || admitted.Load() < 5 || denied.Load() == 0 {
				t.Errorf("the upstream held %d at once; %d admitted, %d denied; want at most 5, at least 5 admitted, some denied",
					m, admitted.Load(), denied.Load())
			}
			for _, p := range ps {
				if v := pollMetric(t, p, `faucet_in_flight{rule="conc"}`, func(v float64) bool { return v == 0 }); v != 0 {
					t.Errorf("faucet_in_flight %v at the end, want 0", v)
				}
			}
			// Every slot back: 5 at once pass, split over both instances.
			deadline := time.Now().Add(10 * time.Second)
			for {
				ok := 0
				for i, a := range together(5, client, ps[0].url("/again")) {
					if a.err != nil {
						t.Fatalf("request %d: %v", i, a.err)
					}
					if a.status == http.StatusOK {
						ok++
					}
				}
				if ok == 5 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of 5 admitted at once after every request ended, want 5", ok)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
