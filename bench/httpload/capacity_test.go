package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// The upstream serves no faster than its capacity: 20 requests at once at
// 100 a second take at least 200 ms, one after the other, and /stats
// counts each once.
func TestCapacityUpstream(t *testing.T) {
	_, url := startCapacity(t, "100")
	begin := time.Now()
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for range 20 {
		wg.Go(func() {
			resp, err := http.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	if took := time.Since(begin); took < 200*time.Millisecond {
		t.Errorf("20 requests at 100 a second took %v, want at least 200ms", took)
	}
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("status %d, want 200", c)
		}
	}
	if served, abandoned := totals(t, url); served != 20 || abandoned != 0 {
		t.Errorf("stats: %d served, %d abandoned; want 20 and 0", served, abandoned)
	}
}

// A request whose client gives up while it waits in the queue is counted
// as abandoned, not served, and takes none of the upstream's time.
func TestCapacityUpstreamAbandoned(t *testing.T) {
	u, url := startCapacity(t, "1") // a second per request
	var wg sync.WaitGroup
	defer wg.Wait()
	get := func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	wg.Go(func() { get(context.Background()) })
	// The worker has taken the first request once the queue is empty
	// again; the second then waits behind it.
	waitUntil(t, func() bool { return totalsNow(u) == 0 && len(u.queue) == 0 && u.taken.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() { get(ctx) })
	waitUntil(t, func() bool { return len(u.queue) == 1 })
	cancel()
	wg.Wait()
	var served, abandoned int
	waitUntil(t, func() bool { served, abandoned = totals(t, url); return served == 1 && abandoned == 1 })
	// The worker skips it: it takes no second request.
	waitUntil(t, func() bool { return len(u.queue) == 0 })
	if n := u.taken.Load(); n != 1 {
		t.Errorf("the worker served %d requests, want 1: the abandoned one took its time", n)
	}
}

// startCapacity starts a capacity upstream of schedule sched.
func startCapacity(t *testing.T, sched string) (*capacityUpstream, string) {
	t.Helper()
	sc, err := parseSchedule(sched)
	if err != nil {
		t.Fatal(err)
	}
	u := &capacityUpstream{sched: sc, start: time.Now(), queue: make(chan *job, 100)}
	go u.work()
	srv := httptest.NewServer(u)
	t.Cleanup(func() { srv.Close(); close(u.queue) })
	return u, srv.URL
}

// totals are the requests served and abandoned so far, from /stats.
func totals(t *testing.T, url string) (served, abandoned int) {
	t.Helper()
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ss []second
	if err := json.NewDecoder(resp.Body).Decode(&ss); err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		served += s.Served
		abandoned += s.Abandoned
	}
	return served, abandoned
}

// totalsNow is the requests served and abandoned so far.
func totalsNow(u *capacityUpstream) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, s := range u.seconds {
		n += s.Served + s.Abandoned
	}
	return n
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10 s")
}
