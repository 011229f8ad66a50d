package envoyrls

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/faucetgo/faucet/engine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// downLimiter is a store's Limiter whose store is down: with a fallback
// engine it answers from it (the error wraps engine.ErrFallback), as
// redisstore's and pgstore's Stores do; without one it only fails.
type downLimiter struct {
	e, fb *engine.Engine
}

func (d *downLimiter) Take(ctx context.Context, key string, n float64) (engine.Decision, error) {
	var out [1]engine.Decision
	_, err := d.TakeAll(ctx, []engine.Take{{Limiter: d, Key: key, N: n}}, out[:])
	return out[0], err
}

func (d *downLimiter) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	if d.fb == nil {
		return -1, fmt.Errorf("store down: %w", engine.ErrUnavailable)
	}
	inner := make([]engine.Take, len(takes))
	for i, tk := range takes {
		inner[i] = tk
		inner[i].Limiter = tk.Limiter.(*downLimiter).fb
	}
	k, _ := inner[0].Limiter.TakeAll(ctx, inner, out)
	return k, fmt.Errorf("store down: %w: %w", engine.ErrFallback, engine.ErrUnavailable)
}

func (d *downLimiter) Limit() engine.Limit { return d.e.Limit() }
func (d *downLimiter) Burst() float64      { return d.e.Burst() }
func (d *downLimiter) Close() error {
	if d.fb != nil {
		d.fb.Close()
	}
	return d.e.Close()
}

// downStore is a store that is down, falling back at half of each limit
// when fallback is set.
func downStore(fallback bool) *engine.Pool {
	return engine.NewPool(func(s engine.Spec) (engine.Limiter, error) {
		e, err := engine.New(engine.Config{Limit: s.Limit, Burst: s.Burst})
		if err != nil {
			return nil, err
		}
		d := &downLimiter{e: e}
		if fallback {
			if d.fb, err = engine.New(engine.Config{Limit: s.Limit / 2, Burst: s.Burst / 2}); err != nil {
				return nil, err
			}
		}
		return d, nil
	})
}

// While the store is down, the service answers from the store's fallback
// (half of 10 per minute here: 5 OK, then OVER_LIMIT) rather than
// Unavailable, which Envoy's default failure_mode_deny false turns into an
// admission; OnStoreError hears every failure. A store without a fallback
// is still Unavailable.
func TestStoreDownAnswersFromTheFallback(t *testing.T) {
	const cfg = `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 10}
`
	var heard atomic.Int64
	store := downStore(true)
	defer store.Close()
	r := startRLS(t, Options{Store: store, OnStoreError: func(error) { heard.Add(1) }}, cfg)
	var got []pb.RateLimitResponse_Code
	for range 7 {
		resp, err := r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "d", Descriptors: []*common.RateLimitDescriptor{desc("k", "v")}})
		if err != nil {
			t.Fatalf("store down with a fallback: %v, want an answer", err)
		}
		got = append(got, resp.OverallCode)
	}
	want := "[OK OK OK OK OK OVER_LIMIT OVER_LIMIT]"
	if fmt.Sprint(got) != want || heard.Load() != 7 {
		t.Errorf("store down: %v, OnStoreError heard %d; want %s and 7", got, heard.Load(), want)
	}
	bare := downStore(false)
	defer bare.Close()
	r = startRLS(t, Options{Store: bare}, cfg)
	_, err := r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "d", Descriptors: []*common.RateLimitDescriptor{desc("k", "v")}})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("store down without a fallback: %v, want Unavailable", err)
	}
}
