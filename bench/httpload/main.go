// Command httpload measures what faucet serve adds to an HTTP request on
// loopback. It is eight tools in one binary, each meant to run as its own
// process, so that the load generator and the servers never share a Go
// runtime:
//
//	httpload upstream --listen ADDR              a minimal upstream ("ok")
//	httpload proxy --listen ADDR --upstream URL  a plain reverse proxy, configured as faucet serve's
//	                                             (built with -tags linked, in a binary of serve's weight: linked.go)
//	httpload deny --listen ADDR                  a bare server answering every request with faucet serve's 429 (deny.go)
//	httpload fastdeny --listen ADDR              the same on fasthttp (fast.go)
//	httpload fastproxy --listen ADDR --upstream URL  a minimal proxy on fasthttp (fast.go)
//	httpload run --target NAME=URL[,PID[+PID...]] [--target ...] [--rate R | --conns C] --duration D [--slice S]
//	httpload capacity --listen ADDR --schedule C[,AT=C]... --start T   an upstream of C requests/s, first in first out (capacity.go)
//	httpload adapt --target URL --metrics URL --upstream-stats URL --start T --rate R --duration D
//	                                             loads faucet serve in front of it, per second (adapt.go)
//
// run prints, for each target, one line in Go benchmark format with the
// requests per second, the latency percentiles and, with PIDs, the CPU time
// the server processes spent per request while measured, summed (user + system,
// read from the kernel's CPU clock of the process). Several targets are loaded in turn, a slice of --slice each,
// over the same --duration: what else runs on the machine, and how that
// changes from one second to the next, then falls on all of them alike. (CPU
// time per request moves with it: a server that has fewer requests to batch
// per wakeup spends more per request.) With --rate it is open-loop: requests are
// scheduled at a fixed rate and each latency counts from its scheduled time,
// so a stall is charged to every request it delays (no coordinated
// omission). With --conns it is closed-loop: C connections send as fast as
// they can, which measures throughput.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/faucetgo/faucet/internal/gcfloor"

	"github.com/HdrHistogram/hdrhistogram-go"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: httpload upstream|proxy|deny|fastdeny|fastproxy|run|capacity|adapt [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "capacity":
		capacityMain(os.Args[2:])
		return
	case "adapt":
		adaptMain(os.Args[2:])
		return
	}
	fs := flag.NewFlagSet("httpload "+os.Args[1], flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "listen address (upstream, proxy, deny)")
	upstream := fs.String("upstream", "", "upstream URL (proxy)")
	var targets []*target
	fs.Func("target", "`NAME=URL[,PID[+PID...]]` to load, and the server processes whose CPU time per request to report, summed (NGINX's master and workers); repeat it to load several in turn (run)", func(v string) error {
		t, err := parseTarget(v)
		if err == nil {
			targets = append(targets, t)
		}
		return err
	})
	load := fs.String("load", "", "name of the load in the benchmark name (run; default rateR or connsC)")
	rate := fs.Int("rate", 0, "open-loop requests per second (run)")
	conns := fs.Int("conns", 0, "closed-loop connections (run)")
	duration := fs.Duration("duration", 5*time.Second, "measured time, shared by the targets (run)")
	warmup := fs.Duration("warmup", time.Second, "unmeasured time before it (run)")
	slice := fs.Duration("slice", 250*time.Millisecond, "how long each target is loaded before the next one's turn (run)")
	fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "upstream":
		serve(*listen, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	case "proxy":
		u, err := url.Parse(*upstream)
		if err != nil || u.Host == "" {
			fmt.Fprintln(os.Stderr, "httpload proxy: --upstream must be a URL")
			os.Exit(2)
		}
		gcfloor.Keep()
		serve(*listen, newProxy(u))
	case "deny":
		// The same floor under the heap as serve's, so that the two
		// collect as often.
		gcfloor.Keep()
		serve(*listen, http.HandlerFunc(deny))
	case "fastdeny":
		gcfloor.Keep()
		serveFast(*listen, fastDeny)
	case "fastproxy":
		u, err := url.Parse(*upstream)
		if err != nil || u.Host == "" {
			fmt.Fprintln(os.Stderr, "httpload fastproxy: --upstream must be a URL")
			os.Exit(2)
		}
		gcfloor.Keep()
		serveFast(*listen, fastProxy(u.Host))
	case "run":
		if len(targets) == 0 || (*rate > 0) == (*conns > 0) || *slice <= 0 {
			fmt.Fprintln(os.Stderr, "httpload run: at least one --target, exactly one of --rate, --conns, and a positive --slice")
			os.Exit(2)
		}
		if *load == "" {
			*load = fmt.Sprintf("rate%d", *rate)
			if *conns > 0 {
				*load = fmt.Sprintf("conns%d", *conns)
			}
		}
		run(targets, *load, *rate, *conns, *slice, *warmup, *duration)
	default:
		fmt.Fprintf(os.Stderr, "httpload: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

// newProxy mirrors faucet serve's proxy: same transport settings, same
// forwarding header handling, same pool of copy buffers, no limiter. (The
// proxy command also sets the same floor under the heap: gcfloor.Keep.)
func newProxy(u *url.URL) http.Handler {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport:  t,
		BufferPool: copyBuffers{},
	}
}

var copyBufferPool = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// copyBuffers is faucet serve's pool of the buffers a response body is
// copied through.
type copyBuffers struct{}

func (copyBuffers) Get() []byte { return copyBufferPool.Get().(*[32 << 10]byte)[:] }

func (copyBuffers) Put(b []byte) {
	if len(b) == 32<<10 {
		copyBufferPool.Put((*[32 << 10]byte)(b))
	}
}

// serve prints "listening on ADDR" and serves until SIGTERM or SIGINT.
func serve(addr string, h http.Handler) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
}

// target is one server that run loads, and what it measured of it.
type target struct {
	name, url string
	pids      []int

	mu              sync.Mutex
	hist            *hdrhistogram.Histogram
	measured        int64
	statusErr, errs int64
	cpuFrom, cpu    time.Duration
	activeNs        time.Duration // time the target was loaded in the measured window
}

// parseTarget parses --target NAME=URL[,PID[+PID...]].
func parseTarget(s string) (*target, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || rest == "" {
		return nil, fmt.Errorf("--target %q: want NAME=URL[,PID[+PID...]]", s)
	}
	t := &target{name: name, url: rest, hist: hdrhistogram.New(1_000, 10_000_000_000, 3)} // 1 µs to 10 s, ns
	if u, ps, ok := strings.Cut(rest, ","); ok {
		t.url = u
		for p := range strings.SplitSeq(ps, "+") {
			pid, err := strconv.Atoi(p)
			if err != nil || pid <= 0 {
				return nil, fmt.Errorf("--target %q: bad PID %q", s, p)
			}
			t.pids = append(t.pids, pid)
		}
	}
	return t, nil
}

// run loads the targets in turn, slice by slice (targets[0] for the first
// slice, targets[1] for the next, and so on round), so that each sees the
// same machine: whatever else runs on it, and its changes over time, are
// shared out between them, not charged to whichever ran at a bad moment.
func run(targets []*target, load string, rate, conns int, slice, warmup, duration time.Duration) {
	workers := conns
	if rate > 0 {
		workers = 256 // enough that a stall queues requests rather than workers
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: workers * len(targets), MaxIdleConnsPerHost: workers}, Timeout: 10 * time.Second}
	start := time.Now()
	measureFrom, end := start.Add(warmup), start.Add(warmup+duration)
	// targetAt is the target loaded at time s.
	targetAt := func(s time.Time) *target {
		return targets[int(s.Sub(start)/slice)%len(targets)]
	}
	for s := measureFrom; s.Before(end); {
		next := start.Add((s.Sub(start)/slice + 1) * slice)
		if next.After(end) {
			next = end
		}
		targetAt(s).activeNs += next.Sub(s)
		s = next
	}
	one := func(t *target, scheduled time.Time) {
		resp, err := client.Get(t.url)
		done := time.Now()
		ok := err == nil
		if ok {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if scheduled.Before(measureFrom) {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		switch {
		case !ok:
			t.errs++
		case resp.StatusCode != http.StatusOK:
			t.statusErr++
		}
		t.hist.RecordValue(int64(done.Sub(scheduled)))
		t.measured++
	}
	cpuDone := make(chan struct{})
	go func() {
		defer close(cpuDone)
		time.Sleep(time.Until(measureFrom))
		for _, t := range targets {
			t.cpuFrom = cpuTime(t.pids)
		}
		time.Sleep(time.Until(end))
		for _, t := range targets {
			t.cpu = cpuTime(t.pids) - t.cpuFrom
		}
	}()
	var wg sync.WaitGroup
	if rate > 0 {
		tickets := make(chan time.Time, 1<<16)
		for range workers {
			wg.Go(func() {
				for s := range tickets {
					one(targetAt(s), s)
				}
			})
		}
		interval := time.Second / time.Duration(rate)
		for s := start; s.Before(end); s = s.Add(interval) {
			if d := time.Until(s); d > 0 {
				time.Sleep(d)
			}
			tickets <- s
		}
		close(tickets)
	} else {
		for range workers {
			wg.Go(func() {
				for {
					s := time.Now()
					if !s.Before(end) {
						return
					}
					one(targetAt(s), s)
				}
			})
		}
	}
	wg.Wait()
	<-cpuDone
	for _, t := range targets {
		fmt.Printf("BenchmarkHTTP/target=%s/load=%s %d %.0f ns/op %.0f req/s %d p50-ns %d p99-ns %d p99.9-ns %.4f non200/op",
			t.name, load, t.measured, t.hist.Mean(), float64(t.measured)/t.activeNs.Seconds(),
			t.hist.ValueAtQuantile(50), t.hist.ValueAtQuantile(99), t.hist.ValueAtQuantile(99.9), float64(t.statusErr+t.errs)/float64(max(t.measured, 1)))
		if len(t.pids) > 0 {
			fmt.Printf(" %.0f server-cpu-ns/op", float64(t.cpu)/float64(max(t.measured, 1)))
		}
		fmt.Println()
	}
}

// cpuTime is the CPU time (user + system) the processes pids have run so
// far, summed.
func cpuTime(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		sum += processCPU(pid)
	}
	return sum
}

// processCPU is the CPU time process pid has run so far, in nanoseconds,
// its exited threads included, from the kernel's CPU clock of the process:
// /proc/PID/stat gives the same sum, but in clock ticks of 10 ms, which at
// 2,000 requests per second over 5 s is 1 µs per request. 0 if the clock
// cannot be read.
func processCPU(pid int) time.Duration {
	// The clock ID of process pid's CPUCLOCK_SCHED clock (see
	// clock_getcpuclockid(3) and the kernel's posix-timers.h).
	id := uintptr(^pid<<3 | 2)
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, id, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
