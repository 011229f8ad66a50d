package adaptive

import (
	"sync"
	"testing"
	"time"
)

// Observe from several goroutines while Step runs: under -race, no data
// race; and every observation is counted by some step, none twice, when
// all steps are healthy (nothing is spent).
func TestConcurrentObserveAndStep(t *testing.T) {
	c := mustNew(t, Config{Floor: 1, Ceiling: 1e6, Initial: 1, LatencyTarget: time.Second, Window: 100 * time.Second, MinSamples: 1})
	const goroutines, each = 4, 20_000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	steps := make(chan int)
	go func() {
		s := 0
		for {
			select {
			case <-stop:
				steps <- s
				return
			default:
				s++
				step(c, s)
			}
		}
	}()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c.Observe(t0, time.Duration(g*each+i)*time.Microsecond%time.Second, false)
			}
		}()
	}
	wg.Wait()
	close(stop)
	s := <-steps
	// The last 100 steps' window holds whatever came after the first ones.
	for k := 1; k <= 101; k++ {
		step(c, s+k)
	}
	st := c.Stats()
	if st.Decreases != 0 || st.Rate < 1 || st.Rate > 1e6 {
		t.Errorf("stats %+v: want no decrease and the rate within its bounds", st)
	}
}

// The total over a window of as many steps as were run counts every
// observation exactly once. ErrorRate 1 keeps a step from finding the
// upstream unhealthy: a step that ran while only the goroutine of the
// failures had observed would, and its verdict would spend the window.
func TestConcurrentObserveCounted(t *testing.T) {
	c := mustNew(t, Config{Floor: 1, Ceiling: 1e6, LatencyTarget: time.Second, Window: 100 * time.Second, MinSamples: 1, ErrorRate: 1})
	const goroutines, each = 4, 10_000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c.Observe(t0, time.Duration(i%7)*time.Millisecond, g == 0 && i%10 == 0)
			}
		}()
	}
	for s := 1; s <= 50; s++ {
		step(c, s)
	}
	wg.Wait()
	step(c, 51)
	st := c.Stats()
	if st.Samples != goroutines*each {
		t.Errorf("the last step judged %d samples, want all %d", st.Samples, goroutines*each)
	}
	if want := float64(each/10) / float64(goroutines*each); st.ErrorShare != want {
		t.Errorf("error share %g, want %g", st.ErrorShare, want)
	}
}
