package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// httpload adapt loads faucet serve, open loop, in front of a capacity
// upstream whose capacity changes, and prints per second of the run what
// the clients got, the adaptive rate faucet had and what the upstream
// did; then, at each change of the capacity, how long the upstream's p99
// took to come back under the target and what faucet admitted after.

// clientSecond is what the clients got for the requests sent in one second.
type clientSecond struct {
	sent, admitted, denied, ok int // admitted: every answer but a 429
	rate                       float64
	scraped                    bool
}

// adaptMain is httpload adapt.
func adaptMain(args []string) {
	fs := flag.NewFlagSet("httpload adapt", flag.ExitOnError)
	target := fs.String("target", "", "URL to load: faucet serve's")
	metrics := fs.String("metrics", "", "URL of faucet serve's metrics")
	rule := fs.String("rule", "upstream", "the adaptive rule whose faucet_adaptive_rate to scrape")
	stats := fs.String("upstream-stats", "", "URL of the capacity upstream's /stats")
	rate := fs.Int("rate", 1500, "open-loop requests per second")
	duration := fs.Duration("duration", 70*time.Second, "how long to load")
	start := fs.Int64("start", 0, "the run's start, Unix seconds, the upstream's too")
	warmup := fs.Duration("warmup", 3*time.Second, "unmeasured load before the start, while the upstream's capacity is twice its first")
	label := fs.String("label", "", "`KEY=VALUE` to name the run by in the benchmark names, after their first part")
	latencyTarget := fs.Duration("latency-target", 50*time.Millisecond, "the upstream's p99 to come back under")
	fs.Parse(args)
	if *target == "" || *metrics == "" || *stats == "" || *rate <= 0 || *start <= 0 || *duration < time.Second || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "httpload adapt: --target, --metrics, --upstream-stats, --start, a positive --rate and a --duration of 1 s or more, a --warmup of 0 or more")
		os.Exit(2)
	}
	begin := time.Unix(*start, 0)
	n := int(*duration / time.Second)
	secs := make([]clientSecond, n)
	var mu sync.Mutex
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096}, Timeout: 10 * time.Second}

	// The rate in force, scraped in the middle of each second.
	var scraper sync.WaitGroup
	scraper.Go(func() {
		name := `faucet_adaptive_rate{rule="` + *rule + `"}`
		for i := range n {
			time.Sleep(time.Until(begin.Add(time.Duration(i)*time.Second + 500*time.Millisecond)))
			if v, ok := scrape(client, *metrics, name); ok {
				mu.Lock()
				secs[i].rate, secs[i].scraped = v, true
				mu.Unlock()
			}
		}
	})

	var wg sync.WaitGroup
	interval := time.Second / time.Duration(*rate)
	end := begin.Add(*duration)
	for s := begin.Add(-*warmup); s.Before(end); s = s.Add(interval) {
		if d := time.Until(s); d > 0 {
			time.Sleep(d)
		}
		if s.Before(begin) {
			wg.Go(func() {
				if resp, err := client.Get(*target); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			continue
		}
		i := int(s.Sub(begin) / time.Second)
		wg.Go(func() {
			code := 0
			if resp, err := client.Get(*target); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
			}
			mu.Lock()
			defer mu.Unlock()
			c := &secs[i]
			c.sent++
			switch code {
			case http.StatusTooManyRequests:
				c.denied++
			case http.StatusOK:
				c.ok++
				c.admitted++
			default:
				if code != 0 {
					c.admitted++
				}
			}
		})
	}
	wg.Wait()
	scraper.Wait()

	resp, err := client.Get(*stats)
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpload adapt:", err)
		os.Exit(1)
	}
	var up []second
	err = json.NewDecoder(resp.Body).Decode(&up)
	resp.Body.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpload adapt: the upstream's stats:", err)
		os.Exit(1)
	}
	up = append(up, make([]second, max(0, n-len(up)))...)[:n]
	prefix := ""
	if *label != "" {
		prefix = "/" + *label
	}
	for i, c := range secs {
		u := up[i]
		fmt.Printf("BenchmarkAdaptiveSecond%s/t=%02d 1 %.0f capacity/s %.0f rate/s %d sent/s %d admitted/s %d denied/s %d ok/s %d served/s %d abandoned/s %.1f upstream-p99-ms\n",
			prefix, i, u.Capacity, c.rate, c.sent, c.admitted, c.denied, c.ok, u.Served, u.Abandoned, float64(u.P99)/1e6)
	}
	for _, f := range figures(secs, up, *latencyTarget) {
		fmt.Println(strings.Replace(f, "BenchmarkAdaptive", "BenchmarkAdaptive"+prefix, 1))
	}
}

// figures are, for each change of the upstream's capacity, a line in Go
// benchmark format: the new capacity; settle-s, the seconds from the
// change to the end of the first second of three in a row whose p99 is
// under the target (-1 if none is within the run); admitted/s and
// served/s, the requests faucet admitted and the upstream served per
// second over the 10 s after that, and pct-of-capacity, the first as a
// share of the capacity; and after a rise, reach90-s, the seconds until the rate in force
// was at least 90 % of the new capacity (-1 if not within the run).
func figures(secs []clientSecond, up []second, target time.Duration) []string {
	var out []string
	for d := 1; d < len(up); d++ {
		c := up[d].Capacity
		if c == up[d-1].Capacity || c == 0 {
			continue
		}
		name := "drop"
		if c > up[d-1].Capacity {
			name = "rise"
		}
		line := fmt.Sprintf("BenchmarkAdaptive/change=%s/at=%ds 1 %.0f capacity/s", name, d, c)
		settled := -1
		for s := d; s+3 <= len(up); s++ {
			if under(up[s:s+3], target) {
				settled = s + 1
				break
			}
		}
		if settled < 0 {
			line += " -1 settle-s"
		} else {
			line += fmt.Sprintf(" %d settle-s", settled-d)
			if settled+10 <= len(secs) {
				admitted, served := 0, 0
				for s := settled; s < settled+10; s++ {
					admitted += secs[s].admitted
					served += up[s].Served
				}
				line += fmt.Sprintf(" %.1f admitted/s %.1f served/s %.1f pct-of-capacity",
					float64(admitted)/10, float64(served)/10, float64(admitted)/10/c*100)
			}
		}
		if name == "rise" {
			reach := -1
			for s := d; s < len(secs); s++ {
				if secs[s].scraped && secs[s].rate >= 0.9*c {
					reach = s - d
					break
				}
			}
			line += fmt.Sprintf(" %d reach90-s", reach)
		}
		out = append(out, line)
	}
	return out
}

// under reports whether every second of ss answered requests, their p99
// under target.
func under(ss []second, target time.Duration) bool {
	for _, s := range ss {
		if s.Served == 0 || s.P99 >= target {
			return false
		}
	}
	return true
}

// scrape reads metric name's value from the Prometheus text at url.
func scrape(c *http.Client, url, name string) (float64, bool) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}
