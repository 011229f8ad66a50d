package httplimit

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// A Middleware on a clock of its own sweeps its default store at that clock.
// The engines' own sweepers judged fullness at the real clock: with a clock
// 26 years ahead of the engines' start, the first sweep evicted every
// drained bucket, and each key was admitted again.
func TestOwnClockSweepsAtThatClock(t *testing.T) {
	defer func(d time.Duration) { ownSweepEvery = d }(ownSweepEvery)
	ownSweepEvery = time.Millisecond
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	rules, err := ParseRules([]byte(`{"rules":[{"name":"key","limit_keys":["header:x-api-key"],"algorithm_config":{"rps":0.001,"burst":1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(rules, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check := func(i int) bool {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Api-Key", fmt.Sprint("k", i))
		return l.Check(r).Allowed
	}
	for i := range 20 {
		if !check(i) {
			t.Fatalf("key %d denied on its first request", i)
		}
	}
	time.Sleep(100 * time.Millisecond) // many sweeps
	for i := range 20 {
		if check(i) {
			t.Fatalf("key %d admitted again after sweeps: its drained bucket was evicted", i)
		}
	}
	if live := l.Stats()[0].Live; live != 20 {
		t.Fatalf("live %d after sweeps, want 20", live)
	}
	// Once the clock has refilled them, the sweeps evict them.
	mu.Lock()
	now = now.Add(2000 * time.Second)
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for l.Stats()[0].Live != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("live %d 10 s after the clock refilled every bucket, want 0", l.Stats()[0].Live)
		}
		time.Sleep(time.Millisecond)
	}
}
