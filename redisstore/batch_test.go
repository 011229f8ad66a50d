package redisstore

import (
	"context"
	"errors"
	"math"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

// queued waits until n checks of l wait in its batcher.
func queued(t *testing.T, l *Limiter, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.batch.mu.Lock()
		got := len(l.batch.queue)
		l.batch.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d checks queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatchesShareScripts: checks made while the Limiter's scripts are on
// their way (here: while the server is stopped) go together, MaxBatch to a
// script, and each is decided as if alone: 200 takes of one bucket of 50
// tokens admit exactly 50, each Decision is the one consecutive calls get,
// and the Limiter sends 4 lone checks then 4 batches. With MaxBatch 1 every
// check is its own script.
func TestBatchesShareScripts(t *testing.T) {
	s := redistest.Start(t)
	for _, tc := range []struct {
		maxBatch, scripts int
	}{{0, maxInFlight + 4}, {1, 200}} {
		l, err := New(newRue(t, s.Addr()), Config{Limit: 1.0 / 3600, Burst: 50, Timeout: 20 * time.Second, OnFailure: FailClosed, MaxBatch: tc.maxBatch, Prefix: "b" + string(rune('0'+tc.maxBatch)) + ":"})
		if err != nil {
			t.Fatal(err)
		}
		signal(t, s, syscall.SIGSTOP)
		var wg sync.WaitGroup
		out := make([]engine.Decision, 200)
		errs := make([]error, 200)
		for i := range out {
			wg.Go(func() { out[i], errs[i] = l.Take(context.Background(), "hot", 1) })
		}
		if tc.maxBatch == 0 {
			queued(t, l, 200-maxInFlight)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
		signal(t, s, syscall.SIGCONT)
		wg.Wait()
		allowed := 0
		seen := map[float64]bool{}
		for i, d := range out {
			if errs[i] != nil {
				t.Fatalf("MaxBatch %d: check %d: %v", tc.maxBatch, i, errs[i])
			}
			if d.Allowed {
				allowed++
				// Each take saw the state the one before it left: the
				// allowed ones leave 49, 48, ... 0 tokens, each once (a
				// quantum of refill may show between two scripts).
				whole := math.Floor(d.Remaining)
				if whole < 0 || whole > 49 || seen[whole] || d.RetryAfter != 0 {
					t.Fatalf("MaxBatch %d: allowed check %d: %+v (another already left %v)", tc.maxBatch, i, d, whole)
				}
				seen[whole] = true
				continue
			}
			// A denied take of an empty bucket refilling 1/3600 token a
			// second waits about an hour for a token: less what refilled,
			// more up to a quantum's refill (3.6 s) if the bucket was
			// stamped at the refill grid's next whole quantum.
			if d.Remaining >= 1 || d.RetryAfter <= 59*time.Minute || d.RetryAfter > time.Hour+3600*time.Millisecond || d.ResetAfter <= 49*time.Hour {
				t.Fatalf("MaxBatch %d: denied check %d: %+v", tc.maxBatch, i, d)
			}
		}
		st := l.Stats()
		if allowed != 50 || st.Allowed != 50 || st.Denied != 150 {
			t.Fatalf("MaxBatch %d: %d allowed (Stats %d allowed, %d denied), want exactly 50 of 200", tc.maxBatch, allowed, st.Allowed, st.Denied)
		}
		if int(st.Scripts) > tc.scripts || (tc.maxBatch == 1 && int(st.Scripts) != 200) {
			t.Fatalf("MaxBatch %d: %d scripts for 200 checks, want at most %d", tc.maxBatch, st.Scripts, tc.scripts)
		}
	}
}

// TestBatchCallerGivesUp: a check whose context ends while it waits for a
// batch gets the policy's answer and the context's error at once, is
// counted once, and is never sent: its bucket stays full.
func TestBatchCallerGivesUp(t *testing.T) {
	s := redistest.Start(t)
	l, err := New(newRue(t, s.Addr()), Config{Limit: 1.0 / 3600, Burst: 5, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	signal(t, s, syscall.SIGSTOP)
	var wg sync.WaitGroup
	for range maxInFlight {
		wg.Go(func() { l.Take(context.Background(), "busy", 1) })
	}
	for {
		l.batch.mu.Lock()
		full := l.batch.inFlight == maxInFlight
		l.batch.mu.Unlock()
		if full {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	d, err := l.Take(ctx, "quitter", 2)
	if !errors.Is(err, context.DeadlineExceeded) || !d.Allowed || d.Remaining != 5 {
		t.Fatalf("gave up: %+v, %v; want FailOpen's answer and the deadline", d, err)
	}
	if class(t, err) != engine.ErrUnavailable {
		t.Fatalf("gave up while queued: %v; want unavailable: it was never sent", err)
	}
	signal(t, s, syscall.SIGCONT)
	wg.Wait()
	if left, err := l.Tokens(context.Background(), "quitter"); err != nil || left != 5 {
		t.Fatalf("quitter's bucket holds %v (%v) after it gave up, want 5: it was sent", left, err)
	}
	if st := l.Stats(); st.StoreErrors != 1 || st.FailedOpen != 1 || st.Allowed != maxInFlight+1 {
		t.Fatalf("stats %+v, want the give-up counted once", st)
	}
}

// TestWhichClientsBatch: a script's keys must share a hash slot, so clients
// that spread keys over servers send every check alone (TestCluster checks
// a rueidis cluster client).
func TestWhichClientsBatch(t *testing.T) {
	s := redistest.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": s.Addr()}})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr()}})
	t.Cleanup(func() { ring.Close(); cluster.Close() })
	for _, tc := range []struct {
		name string
		c    client
		want bool
	}{
		{"rueidis standalone", rueClient{newRue(t, s.Addr())}, true},
		{"go-redis Client", goRedisClient{newGoRedis(t, s.Addr())}, true},
		{"go-redis Ring", goRedisClient{ring}, false},
		{"go-redis ClusterClient", goRedisClient{cluster}, false},
	} {
		l, err := newLimiter(tc.c, Config{Limit: 1, Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		if l.batches != tc.want {
			t.Errorf("%s: batches %v, want %v", tc.name, l.batches, tc.want)
		}
	}
}

// TestBatchFailsByPolicy: when a batch's script fails (here the client is
// closed while the server is stopped, so that no script can be answered),
// every check in it gets its policy's answer and the error, each counted
// once.
func TestBatchFailsByPolicy(t *testing.T) {
	s := redistest.Start(t)
	c := newRue(t, s.Addr())
	l, err := New(c, Config{Limit: 1.0 / 3600, Burst: 5, Timeout: 20 * time.Second, OnFailure: FailClosed, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	signal(t, s, syscall.SIGSTOP)
	const n = 100
	var wg sync.WaitGroup
	out := make([]engine.Decision, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { out[i], errs[i] = l.Take(context.Background(), "k", 1) })
	}
	queued(t, l, n-maxInFlight)
	c.Close()
	wg.Wait()
	signal(t, s, syscall.SIGCONT)
	for i := range n {
		if errs[i] == nil || out[i].Allowed || out[i].RetryAfter != 20*time.Second {
			t.Fatalf("check %d: %+v, %v; want FailClosed's denial and an error", i, out[i], errs[i])
		}
		class(t, errs[i])
	}
	st := l.Stats()
	if st.StoreErrors != n || st.FailedClosed != n || st.Allowed+st.Denied != 0 {
		t.Fatalf("stats %+v, want each of %d failures counted once", st, n)
	}
	// 4 lone checks, then the 96 queued ones in batches of up to 64.
	if st.Scripts > maxInFlight+2 {
		t.Fatalf("%d scripts for %d checks, want at most %d", st.Scripts, n, maxInFlight+2)
	}
}
