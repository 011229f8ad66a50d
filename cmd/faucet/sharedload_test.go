package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

// The shared-load harness: K faucet serve instances with the same rules on
// one shared store, C clients per instance checking one hot key as fast as
// they can, and what got through counted against the one limit they share.
// A store that errors under the load, and a failure policy that then admits
// everything, show as admissions above the bound.

// hotRule is the one rule of a shared-load run: a token bucket per API key.
const hotRule = "per-key"

// hotRules is the rules file of a shared-load run at limit/s with burst.
func hotRules(limit, burst float64) string {
	return fmt.Sprintf(`{"rules":[{"name":%q,"limit_keys":["header:x-api-key"],"algorithm":"token_bucket",
  "algorithm_config":{"rps":%g,"burst":%g}}]}`, hotRule, limit, burst)
}

// hotLoad is one shared-load run.
type hotLoad struct {
	instances, clients int     // K instances, C clients each
	limit, burst       float64 // the rule's rate (tokens/s) and burst
	span               time.Duration
	// maxChecks bounds each client's checks, whatever the time.
	maxChecks int
	// key is the hot API key; "" is hotKey. Runs on one store each need
	// their own.
	key string
	// serveArgs are the store's flags and any other, for every instance.
	serveArgs []string
	// fault, if set, runs once, faultAt into the load, while it goes on;
	// the load lasts at least faultTail past the fault's end, so that the
	// recovery is under load too.
	fault     func()
	faultAt   time.Duration
	faultTail time.Duration
}

// hotResult is what a shared-load run measured.
type hotResult struct {
	checks, admitted, denied int64
	// unavailable counts checks answered 503 (a rule failing closed);
	// errors counts requests with no decision (transport error, non-200,
	// undecodable body).
	unavailable, errors int64
	firstErr            string
	// first is the first check's send, last the last check's reply;
	// slowest is the longest a check took.
	first, last time.Time
	slowest     time.Duration
	// storeErrors and failedOpen are the instances' counters, summed:
	// faucet_store_errors_total and the rule's failed_open decisions.
	storeErrors, failedOpen float64
	// errFrom and errTo bound, conservatively, when store errors occurred
	// (zero without any): from the scrape before the first rise to the
	// reply of the scrape that saw the last.
	errFrom, errTo time.Time
	// faultFrom and faultTo are when the fault began and ended.
	faultFrom, faultTo time.Time
}

// span is the run's length, measured conservatively: from the first
// check's send to the last check's reply.
func (r hotResult) span() time.Duration { return r.last.Sub(r.first) }

// bound is the most one shared bucket may admit in the run: the burst,
// plus the refill over the span.
func (r hotResult) bound(l hotLoad) float64 { return l.burst + l.limit*r.span().Seconds() }

// outage is how long the store failed, conservatively: from the earlier of
// the fault's start and the first store error to the later of the fault's
// end and the last store error; 0 if neither happened.
func (r hotResult) outage() time.Duration {
	from, to := r.faultFrom, r.faultTo
	if !r.errFrom.IsZero() {
		if from.IsZero() || r.errFrom.Before(from) {
			from = r.errFrom
		}
		if to.IsZero() || r.errTo.After(to) {
			to = r.errTo
		}
	}
	return to.Sub(from)
}

// fallbackAllowance is what the instances may admit on their own while the
// store fails, each deciding in memory at share of the rule's rate and
// burst:
//
//	allowance = Σ over instances of share × (Burst + Limit × outage span)
//
// with the outage span from outage, the same for every instance. At share
// 1/K it is one burst and the refill over the outage, as if the store had
// not failed.
func (r hotResult) fallbackAllowance(l hotLoad, share float64) float64 {
	return float64(l.instances) * share * (l.burst + l.limit*r.outage().Seconds())
}

// checksPerSecond is the checks answered per second of the span.
func (r hotResult) checksPerSecond() float64 {
	if s := r.span().Seconds(); s > 0 {
		return float64(r.checks) / s
	}
	return 0
}

func (r hotResult) String() string {
	return fmt.Sprintf("%d checks in %v (%.0f/s, the slowest %v): %d admitted, %d denied, %d unavailable, %d errors; store errors %g, failed open %g",
		r.checks, r.span().Round(time.Millisecond), r.checksPerSecond(), r.slowest.Round(time.Millisecond),
		r.admitted, r.denied, r.unavailable, r.errors, r.storeErrors, r.failedOpen)
}

// runHotLoad starts l.instances faucet serve with the same rules and
// l.serveArgs, warms every client's connection on a key of its own, then
// sends checks on one hot key from every client until the span is over
// (and the fault's tail, if any) or each has sent l.maxChecks, and returns
// the counts. The instances stop when the test ends.
func runHotLoad(tb testing.TB, l hotLoad) hotResult {
	tb.Helper()
	rules := filepath.Join(tb.TempDir(), "rules.json")
	writeRules(tb, rules, hotRules(l.limit, l.burst))
	procs := make([]*proc, l.instances)
	for i := range procs {
		procs[i] = startServe(tb, append([]string{"--rules", rules}, l.serveArgs...)...)
	}
	// A run's instances end with it: a benchmark's runs share the store,
	// whose connections and heartbeats they would otherwise keep.
	defer func() {
		for _, p := range procs {
			p.cmd.Process.Kill()
			<-p.ended
		}
	}()
	// Every instance counts the others before the load, so that a
	// failure decides at 1/instances from the start.
	waitInstances(tb, strconv.Itoa(l.instances), procs...)
	var clients []*hotClient
	for i, p := range procs {
		for j := range l.clients {
			clients = append(clients, newHotClient(p, fmt.Sprintf("warm-%d-%d", i, j)))
		}
	}
	defer func() {
		for _, c := range clients {
			c.http.CloseIdleConnections()
		}
	}()
	// Warm-up: each client's connection, and each instance's connections
	// to the store, are open before the hot key's first check.
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for range 3 {
				c.check(c.warm)
			}
		})
	}
	wg.Wait()
	for _, c := range clients {
		if c.errors != 0 {
			tb.Fatalf("warm-up: %d of 3 checks failed on %s: %s", c.errors, c.p.addr, c.firstErr)
		}
		c.checks, c.admitted, c.denied, c.unavailable = 0, 0, 0, 0
		c.first, c.last, c.slowest = time.Time{}, time.Time{}, 0
	}

	base := make([]storeCounters, len(procs))
	for i, p := range procs {
		base[i] = scrapeStore(tb, p)
	}
	key := cmp.Or(l.key, hotKey)
	start := time.Now()
	// The deadline moves on if a fault ends late, so that the recovery
	// is under load too; hardStop bounds the run whatever the fault does.
	// Only the fault's goroutine moves it.
	var deadline atomic.Int64
	deadline.Store(start.Add(l.span).UnixNano())
	hardStop := start.Add(l.span + 30*time.Second)
	var res hotResult
	stop := make(chan struct{})
	var faultDone chan struct{}
	if l.fault != nil {
		faultDone = make(chan struct{})
		go func() {
			defer close(faultDone)
			select {
			case <-time.After(l.faultAt):
			case <-stop:
				return
			}
			// The load goes on while the fault does, then for the tail.
			deadline.Store(hardStop.UnixNano())
			res.faultFrom = time.Now()
			l.fault()
			res.faultTo = time.Now()
			end := max(start.Add(l.span).UnixNano(), res.faultTo.Add(l.faultTail).UnixNano())
			deadline.Store(min(end, hardStop.UnixNano()))
		}()
	}
	watch := make([]*errorWatch, len(procs))
	var watchers sync.WaitGroup
	for i, p := range procs {
		watch[i] = &errorWatch{p: p, base: base[i].storeErrors}
		watchers.Go(func() { watch[i].run(stop) })
	}
	for _, c := range clients {
		wg.Go(func() {
			for c.checks+c.errors < int64(l.maxChecks) && time.Now().UnixNano() < deadline.Load() {
				c.check(key)
			}
		})
	}
	wg.Wait()
	close(stop)
	watchers.Wait()
	if faultDone != nil {
		<-faultDone
	}
	if l.fault != nil && res.faultTo.IsZero() {
		tb.Fatalf("the load ended before the fault began (%v in)", l.faultAt)
	}

	for _, c := range clients {
		res.add(c)
	}
	for i, p := range procs {
		end := scrapeStore(tb, p)
		res.storeErrors += end.storeErrors - base[i].storeErrors
		res.failedOpen += end.failedOpen - base[i].failedOpen
		if w := watch[i]; !w.from.IsZero() {
			if res.errFrom.IsZero() || w.from.Before(res.errFrom) {
				res.errFrom = w.from
			}
			if w.to.After(res.errTo) {
				res.errTo = w.to
			}
		}
		if end.storeErrors > watch[i].seen {
			// Errors after the last scrape of the run: up to now.
			if res.errFrom.IsZero() {
				res.errFrom = watch[i].at
			}
			res.errTo = time.Now()
		}
	}
	return res
}

// add counts c's checks in r.
func (r *hotResult) add(c *hotClient) {
	r.checks += c.checks
	r.admitted += c.admitted
	r.denied += c.denied
	r.unavailable += c.unavailable
	r.errors += c.errors
	if r.firstErr == "" {
		r.firstErr = c.firstErr
	}
	if !c.first.IsZero() && (r.first.IsZero() || c.first.Before(r.first)) {
		r.first = c.first
	}
	if c.last.After(r.last) {
		r.last = c.last
	}
	r.slowest = max(r.slowest, c.slowest)
}

// hotKey is the API key every client of a run checks, by default.
const hotKey = "hot"

// hotClient is one load client: its own HTTP client, with one keep-alive
// connection to its instance, and its counts. Only its goroutine touches
// it until the run has ended.
type hotClient struct {
	p    *proc
	http *http.Client
	warm string // its warm-up key

	checks, admitted, denied, unavailable, errors int64
	firstErr                                      string
	first, last                                   time.Time
	slowest                                       time.Duration
}

func newHotClient(p *proc, warm string) *hotClient {
	return &hotClient{p: p, warm: warm, http: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true},
	}}
}

// check sends one check on key and counts its answer.
func (c *hotClient) check(key string) {
	body := `{"path":"/x","headers":{"x-api-key":"` + key + `"}}`
	sent := time.Now()
	if c.first.IsZero() {
		c.first = sent
	}
	out, err := c.post(body)
	c.last = time.Now()
	c.slowest = max(c.slowest, c.last.Sub(sent))
	if err != nil {
		c.errors++
		if c.firstErr == "" {
			c.firstErr = err.Error()
		}
		return
	}
	c.checks++
	switch {
	case out.Allowed:
		c.admitted++
	case out.Reason == httplimit.ReasonStoreUnavailable:
		c.unavailable++
	default:
		c.denied++
	}
}

func (c *hotClient) post(body string) (checkOut, error) {
	var out checkOut
	resp, err := c.http.Post(c.p.url("/v1/check"), "application/json", strings.NewReader(body))
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return out, err
	}
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("POST /v1/check: %s: %.200s", resp.Status, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("POST /v1/check: %v: %.200s", err, b)
	}
	return out, nil
}

// storeCounters are the counters of one instance that tell of its store.
type storeCounters struct{ storeErrors, failedOpen float64 }

// scrapeStore reads p's store counters from its admin listener.
func scrapeStore(tb testing.TB, p *proc) storeCounters {
	tb.Helper()
	c, err := readStoreCounters(p)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func readStoreCounters(p *proc) (storeCounters, error) {
	var c storeCounters
	resp, err := testClient.Get(p.adminURL("/metrics"))
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return c, err
	}
	found := false
	for line := range bytes.Lines(b) {
		name, value, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch {
		case name == "faucet_store_errors_total":
			c.storeErrors, found = v, true
		case strings.HasPrefix(name, "faucet_decisions_total{") && strings.Contains(name, `result="failed_open"`) &&
			strings.Contains(name, `rule="`+hotRule+`"`):
			c.failedOpen = v
		}
	}
	if !found {
		return c, fmt.Errorf("%s/metrics lacks faucet_store_errors_total", p.admin)
	}
	return c, nil
}

// errorWatch scrapes one instance's store errors every 100 ms during a
// run, to bound when they occurred.
type errorWatch struct {
	p    *proc
	base float64 // the count before the run
	// seen is the last count read and at when the scrape that read it
	// was sent; from and to bound the rises seen (zero without one).
	seen     float64
	at       time.Time
	from, to time.Time
}

func (w *errorWatch) run(stop <-chan struct{}) {
	w.seen, w.at = w.base, time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		sent := time.Now()
		c, err := readStoreCounters(w.p)
		if err != nil {
			continue
		}
		if c.storeErrors > w.seen {
			// The errors came after the previous scrape was sent and
			// before this one's reply.
			if w.from.IsZero() {
				w.from = w.at
			}
			w.to = time.Now()
		}
		w.seen, w.at = c.storeErrors, sent
	}
}

// leaseRefusal is serve's complaint when it refuses --lease with the
// store flags args (a store without a leased mode yet), or "" if it
// accepts them. Any other complaint fails the test.
func leaseRefusal(tb testing.TB, args ...string) string {
	tb.Helper()
	rules := filepath.Join(tb.TempDir(), "lease-rules.json")
	writeRules(tb, rules, hotRules(100, 100))
	argv := append([]string{"serve", "--rules", rules, "--validate", "--lease"}, args...)
	out, err := exec.Command(faucetBinary(tb), argv...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 2 && strings.Contains(string(out), "--lease") {
		return strings.TrimSpace(string(out))
	}
	if err != nil {
		tb.Fatalf("faucet %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return ""
}

// requireEnv reports whether env is set to 1: a missing server then
// fails the test rather than skipping it.
func requireEnv(env string) bool { return os.Getenv(env) == "1" }

// The bound and the fallback allowance of a run, from its measured times:
// the outage spans the fault and the store errors, whichever began first
// and ended last.
func TestHotResultBounds(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := hotLoad{instances: 4, limit: 100, burst: 100}
	for _, c := range []struct {
		name      string
		r         hotResult
		outage    time.Duration
		allowance float64
	}{
		{"no fault, no error", hotResult{}, 0, 100},
		{"fault only", hotResult{faultFrom: at(1000), faultTo: at(2000)}, time.Second, 200},
		{"errors outlast the fault", hotResult{faultFrom: at(1000), faultTo: at(2000), errFrom: at(1200), errTo: at(3000)}, 2 * time.Second, 300},
		{"errors before the fault", hotResult{faultFrom: at(1000), faultTo: at(2000), errFrom: at(500), errTo: at(1500)}, 1500 * time.Millisecond, 250},
		{"errors without a fault", hotResult{errFrom: at(500), errTo: at(1000)}, 500 * time.Millisecond, 150},
	} {
		c.r.first, c.r.last = at(0), at(5000)
		if b := c.r.bound(l); b != 600 {
			t.Errorf("%s: bound %g, want burst 100 + 100/s × 5 s = 600", c.name, b)
		}
		if o := c.r.outage(); o != c.outage {
			t.Errorf("%s: outage %v, want %v", c.name, o, c.outage)
		}
		if a := c.r.fallbackAllowance(l, 0.25); a != c.allowance {
			t.Errorf("%s: allowance %g, want %g", c.name, a, c.allowance)
		}
	}
}
