// Command httpload measures what faucet serve adds to an HTTP request on
// loopback. It is three tools in one binary, each meant to run as its own
// process, so that the load generator, the proxy and the upstream never share
// a Go runtime:
//
//	httpload upstream --listen ADDR              a minimal upstream ("ok")
//	httpload proxy --listen ADDR --upstream URL  a plain reverse proxy, configured as faucet serve's
//	httpload run --url URL --name NAME [--rate R | --conns C] --duration D [--pid PID]
//
// run prints one line in Go benchmark format with the requests per second,
// the latency percentiles and, with --pid, the CPU time the server process
// PID spent per request while measured (user + system, from /proc): unlike
// latency, it hardly moves when other processes compete for the cores. With --rate it is open-loop: requests are
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

	"github.com/HdrHistogram/hdrhistogram-go"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: httpload upstream|proxy|run [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("httpload "+os.Args[1], flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "listen address (upstream, proxy)")
	upstream := fs.String("upstream", "", "upstream URL (proxy)")
	target := fs.String("url", "", "URL to load (run)")
	name := fs.String("name", "target=unnamed", "benchmark name suffix (run)")
	rate := fs.Int("rate", 0, "open-loop requests per second (run)")
	conns := fs.Int("conns", 0, "closed-loop connections (run)")
	duration := fs.Duration("duration", 5*time.Second, "measured time (run)")
	warmup := fs.Duration("warmup", time.Second, "unmeasured time before it (run)")
	pid := fs.Int("pid", 0, "server process whose CPU time per request to report (run)")
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
		serve(*listen, newProxy(u))
	case "run":
		if *target == "" || (*rate > 0) == (*conns > 0) {
			fmt.Fprintln(os.Stderr, "httpload run: --url and exactly one of --rate, --conns")
			os.Exit(2)
		}
		run(*target, *name, *rate, *conns, *pid, *warmup, *duration)
	default:
		fmt.Fprintf(os.Stderr, "httpload: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

// newProxy mirrors faucet serve's proxy: same transport settings, same
// forwarding header handling, same pool of copy buffers, no limiter.
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

func run(target, name string, rate, conns, pid int, warmup, duration time.Duration) {
	workers := conns
	if rate > 0 {
		workers = 256 // enough that a stall queues requests rather than workers
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: workers, MaxIdleConnsPerHost: workers}, Timeout: 10 * time.Second}
	hist := hdrhistogram.New(1_000, 10_000_000_000, 3) // 1 µs to 10 s, ns
	var mu sync.Mutex
	var statusErr, errs int64
	start := time.Now()
	measureFrom, end := start.Add(warmup), start.Add(warmup+duration)
	var measured int64
	one := func(scheduled time.Time) {
		resp, err := client.Get(target)
		done := time.Now()
		ok := err == nil
		if ok {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if scheduled.Before(measureFrom) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !ok:
			errs++
		case resp.StatusCode != http.StatusOK:
			statusErr++
		}
		hist.RecordValue(int64(done.Sub(scheduled)))
		measured++
	}
	cpu := make(chan time.Duration, 1)
	go func() {
		time.Sleep(time.Until(measureFrom))
		from := cpuTime(pid)
		time.Sleep(time.Until(end))
		cpu <- cpuTime(pid) - from
	}()
	var wg sync.WaitGroup
	if rate > 0 {
		tickets := make(chan time.Time, 1<<16)
		for range workers {
			wg.Go(func() {
				for s := range tickets {
					one(s)
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
					one(s)
				}
			})
		}
	}
	wg.Wait()
	secs := duration.Seconds()
	fmt.Printf("BenchmarkHTTP/%s %d %.0f ns/op %.0f req/s %d p50-ns %d p99-ns %d p99.9-ns %.4f non200/op",
		name, measured, hist.Mean(), float64(measured)/secs,
		hist.ValueAtQuantile(50), hist.ValueAtQuantile(99), hist.ValueAtQuantile(99.9), float64(statusErr+errs)/float64(max(measured, 1)))
	if pid > 0 {
		fmt.Printf(" %.0f server-cpu-ns/op", float64(<-cpu)/float64(max(measured, 1)))
	}
	fmt.Println()
}

// cpuTime is the user + system CPU time of process pid so far (0 if pid is
// 0 or unreadable).
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the line, in clock ticks (USER_HZ, 100 on
	// Linux).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}
