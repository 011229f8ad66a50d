package httplimit_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

// Keys are composed in memory that later requests reuse; still, requests of
// one length but other clients keep apart, a Limiter that keeps the keys it
// is given finds them unchanged, and so does the receiver of a Denial.
func TestKeysSurviveLaterRequests(t *testing.T) {
	doc := `{"rules":[
	 {"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":0.001,"burst":1}},
	 {"name":"per-key","limit_keys":["ip:address","header:x-api-key"],"algorithm_config":{"rps":0.001,"burst":5}}]}`
	clients := []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1"}
	keyOf := func(remote string) string { return remote[:len(remote)-2] }

	t.Run("engine", func(t *testing.T) {
		var denials []httplimit.Denial
		l, _ := newLimiter(t, doc, httplimit.Options{OnDeny: func(d httplimit.Denial) { denials = append(denials, d) }})
		for round, want := range []int{200, 429} {
			for _, c := range clients {
				if w := serve(l, req(c, "/", "X-Api-Key", "k")); w.Code != want {
					t.Fatalf("round %d, client %s: status %d, want %d", round, c, w.Code, want)
				}
			}
		}
		for _, c := range []string{"192.0.2.7:1", "192.0.2.8:1", "192.0.2.9:1"} {
			// Admitted, in the memory the denials' keys were composed in.
			if w := serve(l, req(c, "/", "X-Api-Key", "k")); w.Code != 200 {
				t.Fatalf("client %s: status %d, want 200", c, w.Code)
			}
		}
		if len(denials) != len(clients) {
			t.Fatalf("%d denials, want %d", len(denials), len(clients))
		}
		for i, d := range denials {
			if want := keyOf(clients[i]); d.Key != want {
				t.Errorf("denial %d: key %q, want %q", i, d.Key, want)
			}
		}
	})

	t.Run("store", func(t *testing.T) {
		s := &keyRecorder{}
		s.Pool = engine.NewPool(func(spec engine.Spec) (engine.Limiter, error) {
			e, err := engine.New(engine.Config{Limit: spec.Limit, Burst: spec.Burst})
			return &recordingLimiter{opaque{e: e}, s}, err
		})
		l, _ := newLimiter(t, doc, httplimit.Options{Store: s})
		var want []string
		for _, c := range clients {
			serve(l, req(c, "/", "X-Api-Key", "k"))
			want = append(want, keyOf(c), strconv.Itoa(len(keyOf(c)))+":"+keyOf(c)+"1:k")
		}
		slices.Sort(want)
		got := s.sorted()
		if !slices.Equal(got, want) {
			t.Errorf("keys the store was given, read after all requests:\n got %q\nwant %q", got, want)
		}
	})
}

// keyRecorder is a store whose Limiters keep every key they are given.
type keyRecorder struct {
	*engine.Pool
	mu   sync.Mutex
	keys []string
}

func (s *keyRecorder) sorted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.keys))
}

type recordingLimiter struct {
	opaque
	s *keyRecorder
}

func (r *recordingLimiter) TakeAll(ctx context.Context, takes []engine.Take, out []engine.Decision) (int, error) {
	r.s.mu.Lock()
	for _, tk := range takes {
		r.s.keys = append(r.s.keys, tk.Key)
	}
	r.s.mu.Unlock()
	inner := slices.Clone(takes)
	for i := range inner {
		inner[i].Limiter = inner[i].Limiter.(*recordingLimiter).e
	}
	return r.e.TakeAll(ctx, inner, out)
}
