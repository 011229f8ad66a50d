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

// Keys, and the claims they are read from, are composed in memory that
// later requests reuse; still, requests of one length but other clients
// keep apart, a Limiter that keeps the keys it is given finds them
// unchanged, and so does the receiver of a Denial.
func TestKeysSurviveLaterRequests(t *testing.T) {
	doc := `{"rules":[
	 {"name":"per-user","limit_keys":["jwt:sub"],"algorithm_config":{"rps":0.001,"burst":1},"insecure_unverified_jwt":true},
	 {"name":"per-key","limit_keys":["ip:address","header:x-api-key"],"algorithm_config":{"rps":0.001,"burst":5}}]}`
	type client struct{ remote, ip, user string }
	clients := []client{{"192.0.2.1:1", "192.0.2.1", "user-1"}, {"192.0.2.2:1", "192.0.2.2", "user-2"}, {"192.0.2.3:1", "192.0.2.3", "user-3"}}
	send := func(l *httplimit.Middleware, c client) int {
		return serve(l, req(c.remote, "/", "X-Api-Key", "k", "Authorization", bearer(map[string]any{"sub": c.user}))).Code
	}

	t.Run("engine", func(t *testing.T) {
		var denials []httplimit.Denial
		l, _ := newLimiter(t, doc, httplimit.Options{OnDeny: func(d httplimit.Denial) { denials = append(denials, d) }})
		for round, want := range []int{200, 429} {
			for _, c := range clients {
				if got := send(l, c); got != want {
					t.Fatalf("round %d, client %s: status %d, want %d", round, c.user, got, want)
				}
			}
		}
		for _, c := range []client{{"192.0.2.7:1", "", "user-7"}, {"192.0.2.8:1", "", "user-8"}, {"192.0.2.9:1", "", "user-9"}} {
			// Admitted, in the memory the denials' keys were read into.
			if got := send(l, c); got != 200 {
				t.Fatalf("client %s: status %d, want 200", c.user, got)
			}
		}
		if len(denials) != len(clients) {
			t.Fatalf("%d denials, want %d", len(denials), len(clients))
		}
		for i, d := range denials {
			if want := clients[i].user; d.Key != want || d.Identity != want {
				t.Errorf("denial %d: key %q, identity %q, want %q", i, d.Key, d.Identity, want)
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
			send(l, c)
			want = append(want, c.user, strconv.Itoa(len(c.ip))+":"+c.ip+"1:k")
		}
		slices.Sort(want)
		if got := s.sorted(); !slices.Equal(got, want) {
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
