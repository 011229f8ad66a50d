package logthrottle

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logtest"
)

// 10,000 errors from 4 goroutines make a line per interval at most, and
// the lines with their suppressed counts add up to all 10,000.
func TestThrottledHandlerAccountsForEveryRecord(t *testing.T) {
	const every = 50 * time.Millisecond
	var buf logtest.Buffer
	h := NewHandler(slog.NewJSONHandler(&buf, nil), every)
	log := slog.New(h).With("component", "test")
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2500 {
				log.Error("store failed", "goroutine", g, "i", i)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	h.Flush()
	lines := logtest.Lines(t, buf.String())
	total := int64(len(lines))
	for _, l := range lines {
		total += l.Suppressed
	}
	if total != 10_000 {
		t.Errorf("%d lines with suppressed counts summing to %d records, want 10000", len(lines), total)
	}
	if most := 2 + int(elapsed/every); len(lines) > most {
		t.Errorf("%d lines in %v, want at most %d (one per %v, and the flush)", len(lines), elapsed, most, every)
	}
}

// A run that stops mid-interval is still reported: the timer writes the
// latest record held back, with the count of the others.
func TestThrottledHandlerReportsAfterARunStops(t *testing.T) {
	var buf logtest.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), 20*time.Millisecond))
	for _, e := range []string{"first", "second", "third"} {
		log.Error("store failed", "err", e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(buf.String(), "\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	lines := logtest.Lines(t, buf.String())
	if len(lines) != 2 || lines[0].Err != "first" || lines[0].Suppressed != 0 || lines[1].Err != "third" || lines[1].Suppressed != 1 {
		t.Errorf("lines %+v; want the first error, then the third with 1 suppressed", lines)
	}
}
