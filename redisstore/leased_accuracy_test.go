package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
)

// The accuracy of leases across processes: 4 processes × 16 goroutines on
// one key of one redis-server, each config for 8 s of load far above the
// limit. Together they admit at most Burst + Limit × span, counted exactly,
// and most of Limit × span.
func TestLeasedAccuracyAcrossProcesses(t *testing.T) {
	if os.Getenv("FAUCET_LEASE_WORKER") != "" {
		leaseWorker(t)
		return
	}
	srv := redistest.Start(t)
	const procs, seconds = 4, 8
	for _, tc := range []struct {
		limit, burst float64
		short        bool // runs with -short too
	}{
		{100, 100, true}, {100, 1000, false}, {10_000, 10_000, false}, {10_000, 100_000, true},
	} {
		t.Run(fmt.Sprintf("limit=%v/burst=%v", tc.limit, tc.burst), func(t *testing.T) {
			if testing.Short() && !tc.short {
				t.Skip("-short runs the two ends; the full suite all four")
			}
			prefix := fmt.Sprintf("accuracy-%v-%v:", tc.limit, tc.burst)
			var wg sync.WaitGroup
			outs := make([]bytes.Buffer, procs)
			errs := make([]error, procs)
			for i := range procs {
				cmd := exec.Command(os.Args[0], "-test.run=^TestLeasedAccuracyAcrossProcesses$", "-test.count=1")
				cmd.Env = append(os.Environ(), "FAUCET_LEASE_WORKER="+strings.Join([]string{srv.Addr(), prefix,
					strconv.FormatFloat(tc.limit, 'g', -1, 64), strconv.FormatFloat(tc.burst, 'g', -1, 64), strconv.Itoa(seconds)}, " "))
				cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
				wg.Go(func() { errs[i] = cmd.Run() })
			}
			wg.Wait()
			var total, first, last int64
			for i := range procs {
				if errs[i] != nil {
					t.Fatalf("worker %d: %v\n%s", i, errs[i], outs[i].String())
				}
				var n, from, to int64
				for line := range strings.SplitSeq(outs[i].String(), "\n") {
					fmt.Sscanf(line, "ADMITTED %d FROM %d TO %d", &n, &from, &to)
				}
				if n == 0 {
					t.Fatalf("worker %d admitted nothing:\n%s", i, outs[i].String())
				}
				total += n
				if first == 0 || from < first {
					first = from
				}
				last = max(last, to)
			}
			// The span from the first check's start to the last one's end,
			// on the machine's clock, covers every grant Redis made.
			span := time.Duration(last - first).Seconds()
			bound := tc.burst + tc.limit*span
			steady := tc.limit * span
			t.Logf("%d processes admitted %d in %.3f s: Burst + Limit × span = %.1f (%.2f%% of it); %.2f%% of Limit × span",
				procs, total, span, bound, 100*float64(total)/bound, 100*float64(total)/steady)
			if float64(total) > bound {
				t.Errorf("admitted %d, above Burst + Limit × span = %.1f", total, bound)
			}
			if float64(total) < 0.95*steady {
				t.Errorf("admitted %d, under 95%% of Limit × span (%.0f)", total, steady)
			}
		})
	}
}

// leaseWorker is one process of TestLeasedAccuracyAcrossProcesses: 16
// goroutines checking one key for the given seconds; it prints what it
// admitted.
func leaseWorker(t *testing.T) {
	f := strings.Fields(os.Getenv("FAUCET_LEASE_WORKER"))
	limit, _ := strconv.ParseFloat(f[2], 64)
	burst, _ := strconv.ParseFloat(f[3], 64)
	seconds, _ := strconv.Atoi(f[4])
	l, err := newLimiter(rueClient{newRue(t, f[0])}, Config{Limit: engine.Limit(limit), Burst: burst, Prefix: f[1], Timeout: 10 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewLeased(l, LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	from := time.Now()
	stop := from.Add(time.Duration(seconds) * time.Second)
	for range 16 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				d, err := s.Take(context.Background(), "hot", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	to := time.Now()
	s.Close()
	fmt.Printf("ADMITTED %d FROM %d TO %d\n", admitted.Load(), from.UnixNano(), to.UnixNano())
}

// An instance that dies holding a lease starves the others for at most the
// lease's lifetime: Redis stops counting the lease when it ends, and the
// bucket refills to the whole burst again.
func TestLeasedDeadInstanceStarvesAtMostALifetime(t *testing.T) {
	if os.Getenv("FAUCET_LEASE_HOLDER") != "" {
		leaseHolder(t)
		return
	}
	srv := redistest.Start(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeasedDeadInstanceStarvesAtMostALifetime$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FAUCET_LEASE_HOLDER="+srv.Addr())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("holder: %v\n%s", err, out)
	}
	var held, sent int64
	for line := range strings.SplitSeq(string(out), "\n") {
		fmt.Sscanf(line, "HELD %d SENT %d", &held, &sent)
	}
	// The lease ends a lifetime after the holder asked for it, at the
	// latest (Redis counts from its grant).
	ends := time.Unix(0, sent).Add(holderLifetime)
	if time.Until(ends) < holderLifetime/2 {
		t.Fatalf("the holder took %v to start and die: too slow to see its lease before it ends", time.Since(time.Unix(0, sent)))
	}
	if held < 5000 {
		t.Fatalf("the holder died holding %d quanta, want most of the burst:\n%s", held, out)
	}
	l := leaseLimiterPrefix(t, srv.Addr(), "dead:", 100, 10)
	g, err := l.lease(context.Background(), "hot", 0, 0, time.Second, "report", "", 0)
	if err == nil && g.now >= ends.UnixMicro() {
		t.Fatalf("the check reached Redis %v after the dead holder's lease ended: too slow to see it", time.Duration(g.now-ends.UnixMicro())*time.Microsecond)
	}
	if err != nil || g.out < uint64(held) {
		t.Fatalf("just after the holder died: %+v, %v; want its lease (%d quanta) still counted", g, err, held)
	}
	s, err := NewLeased(l, LeaseOptions{Lifetime: holderLifetime, MaxShare: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d, _ := s.Take(context.Background(), "hot", 10); d.Allowed {
		t.Fatalf("a whole burst while the dead lease holds most of it: %+v", d)
	}
	// Once the lease has ended and the bucket had a burst's refill time
	// (100 ms), the whole burst passes.
	time.Sleep(time.Until(ends.Add(100*time.Millisecond + 50*time.Millisecond)))
	if d, err := s.Take(context.Background(), "hot", 10); err != nil || !d.Allowed {
		t.Errorf("a lifetime and a refill after the holder died: %+v, %v; want the whole burst", d, err)
	}
}

// holderLifetime is the lease lifetime of TestLeasedDeadInstanceStarvesAtMostALifetime:
// long enough for a race-built test binary to start and die within it, and
// for the check after it to reach Redis on a machine loaded with the whole
// suite (3 s was not: a client that took over 1.5 s to connect found the
// lease ended).
const holderLifetime = 8 * time.Second

// leaseHolder takes most of a burst in a lease, then dies without ending it.
func leaseHolder(t *testing.T) {
	l := leaseLimiterPrefix(t, os.Getenv("FAUCET_LEASE_HOLDER"), "dead:", 100, 10)
	s, err := NewLeased(l, LeaseOptions{Lifetime: holderLifetime, MaxShare: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The first lease is one check's; the second is sized from the demand
	// the first measured, as much as the bucket holds.
	var sent time.Time
	for range 2 {
		sent = time.Now()
		if d, err := s.Take(ctx, "hot", 1); err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
	}
	d, _ := s.Take(ctx, "hot", 0)
	fmt.Printf("HELD %d SENT %d\n", int64(math.Round(d.Remaining*1000)), sent.UnixNano())
	os.Exit(0)
}

func leaseLimiterPrefix(t *testing.T, addr, prefix string, limit engine.Limit, burst float64) *Limiter {
	t.Helper()
	l, err := newLimiter(rueClient{newRue(t, addr)}, Config{Limit: limit, Burst: burst, Prefix: prefix, Timeout: 10 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
