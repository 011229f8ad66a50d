package failpolicy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		p      Policy
		share  float64
		keys   int
		reason string // "" for valid
	}{
		{FailOpen, 0, 0, ""},
		{FailClosed, 0, 0, ""},
		{FailOpen, 0.5, 0, "FallbackShare must be 0"},
		{FailClosed, 0, 7, "FallbackMaxKeys must be 0"},
		{Fallback, 0, 0, "FallbackShare must be in (0, 1]"},
		{Fallback, 1.5, 0, "FallbackShare must be in (0, 1]"},
		{Fallback, 0.01, 0, "below 1 token"},
		{Policy(9), 0, 0, "OnFailure must be"},
		{Fallback, 0.5, 0, ""},
	} {
		_, err := Check(tc.p, 10, 50, tc.share, tc.keys, nil)
		if tc.reason == "" && err != nil || tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason)) {
			t.Errorf("Check(%v, share %v, keys %d): %v, want %q", tc.p, tc.share, tc.keys, err, tc.reason)
		}
	}
	cfg, err := Check(Fallback, 10, 50.5, 0.333, -1, nil)
	if err != nil || cfg.Limit != 3.33 || cfg.Burst != 16.816 || cfg.MaxKeys != 0 {
		t.Errorf("fallback config %+v %v: want a third of the limit, the burst rounded down to 0.001, unbounded", cfg, err)
	}
	if cfg, _ := Check(Fallback, 10, 50, 1, 0, nil); cfg.MaxKeys != DefaultFallbackMaxKeys {
		t.Errorf("MaxKeys %d, want the default", cfg.MaxKeys)
	}
}

func TestAnswer(t *testing.T) {
	e, err := engine.New(engine.Config{Limit: 0.001, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	open := Take{Policy: FailOpen, Burst: 5, Timeout: time.Second, Key: "k", N: 1}
	closed := Take{Policy: FailClosed, Burst: 5, Timeout: 2 * time.Second, Key: "k", N: 1}
	fb := Take{Policy: Fallback, Fallback: e, Timeout: 3 * time.Second, Key: "k", N: 1}
	out := make([]engine.Decision, 3)
	if k, all := Answer([]Take{open}, out); k != -1 || all || !out[0].Allowed || out[0].Remaining != 5 {
		t.Errorf("fail-open: %d %v %+v", k, all, out[0])
	}
	if k, _ := Answer([]Take{open, closed}, out); k != 1 || out[0].Allowed || out[1].Allowed || out[1].RetryAfter != 2*time.Second {
		t.Errorf("fail-open and fail-closed: %d %+v", k, out[:2])
	}
	// A fail-closed take denies the call before the engine is asked.
	if k, _ := Answer([]Take{closed, fb}, out); k != 0 || out[1].RetryAfter != 3*time.Second || e.TokensAt(time.Now(), "k") != 1 {
		t.Errorf("fail-closed and fallback: %d %+v, engine holds %v", k, out[:2], e.TokensAt(time.Now(), "k"))
	}
	if k, all := Answer([]Take{fb}, out); k != -1 || !all || !out[0].Allowed {
		t.Errorf("fallback: %d %v %+v", k, all, out[0])
	}
	if k, all := Answer([]Take{fb, open}, out); k != 0 || all || out[0].Allowed || out[1].Allowed {
		t.Errorf("an empty fallback bucket: %d %v %+v", k, all, out[:2])
	}
}

func TestBreaker(t *testing.T) {
	b := NewBreaker(2, time.Hour)
	b.Failed()
	if b.Open() {
		t.Fatal("open after one failure of two")
	}
	b.Succeeded()
	b.Failed()
	if b.Open() {
		t.Fatal("a success did not reset the count")
	}
	b.Failed()
	if !b.Open() {
		t.Fatal("closed after two consecutive failures")
	}
	b.Succeeded()
	if b.Open() {
		t.Fatal("a success did not close it")
	}
	never := NewBreaker(-1, time.Hour)
	for range 100 {
		never.Failed()
	}
	if never.Open() {
		t.Fatal("a breaker with after <= 0 opened")
	}
	short := NewBreaker(1, time.Millisecond)
	short.Failed()
	time.Sleep(5 * time.Millisecond)
	if short.Open() {
		t.Fatal("still open after its hold")
	}
}

func TestBreakerObserve(t *testing.T) {
	b := NewBreaker(2, time.Hour)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		b.Observe(gone, context.Canceled)
	}
	if b.Open() {
		t.Fatal("failures of callers that had given up opened the breaker")
	}
	b.Observe(context.Background(), errors.New("down"))
	b.Observe(context.Background(), errors.New("down"))
	if !b.Open() {
		t.Fatal("two store failures did not open it")
	}
	b.Observe(context.Background(), nil)
	if b.Open() {
		t.Fatal("a success did not close it")
	}
}

func TestError(t *testing.T) {
	cause := errors.New("boom")
	for _, tc := range []struct {
		nothing, fell bool
		class         error
	}{{true, false, engine.ErrUnavailable}, {false, false, engine.ErrOutcomeUnknown}, {false, true, engine.ErrOutcomeUnknown}} {
		err := Error("somestore", cause, tc.nothing, tc.fell)
		if !errors.Is(err, tc.class) || !errors.Is(err, cause) || errors.Is(err, engine.ErrFallback) != tc.fell || !strings.HasPrefix(err.Error(), "somestore: ") {
			t.Errorf("%+v: %v", tc, err)
		}
	}
}
