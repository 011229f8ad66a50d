package redisstore

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

// hsStore is a Store on a client of its own to the server at addr.
func hsStore(t *testing.T, addr string, opts StoreOptions) *Store {
	t.Helper()
	s, err := NewStore(newRue(t, addr), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hsLimiter is an httplimit.Middleware with rules on store: the store's main
// user, which the tests exercise it under (the package itself does not
// import httplimit).
func hsLimiter(t *testing.T, store engine.Store, rules ...httplimit.Rule) *httplimit.Middleware {
	t.Helper()
	return hsLimiterOpts(t, httplimit.Options{Store: store}, rules...)
}

func hsLimiterOpts(t *testing.T, opts httplimit.Options, rules ...httplimit.Rule) *httplimit.Middleware {
	t.Helper()
	l, err := httplimit.New(rules, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func hsPerIP(rate, burst float64) httplimit.Rule {
	return httplimit.Rule{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: rate, Burst: burst}
}

// hsCheck asks l about a GET from ip.
func hsCheck(l *httplimit.Middleware, ip string) httplimit.Result {
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = ip + ":1234"
	return l.Check(r)
}

// Two limiters, each on its own store and client, share one Redis: together
// they admit the burst of one rule, exactly, from goroutines racing on both;
// each alone, on memory stores, would admit it twice.
func TestStoreSharesBucketsAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	const burst = 40
	rule := hsPerIP(1.0/86400, burst)
	limiters := []*httplimit.Middleware{
		hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{}), rule),
		hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{}), rule),
	}
	if admitted := raceChecks(t, limiters, "198.51.100.7"); admitted != burst {
		t.Errorf("admitted %d of 160; want exactly the burst, %d", admitted, burst)
	}
	// Another client has a bucket of its own.
	if res := hsCheck(limiters[0], "198.51.100.8"); !res.Allowed {
		t.Errorf("another address: %+v, want admitted", res)
	}
}

// The store decides as the memory store does: the same requests, meeting
// two rules, get the same decisions, the same denying rule and the same
// remaining tokens (whole: Redis's clock moves on between calls, refilling
// a little).
func TestStoreDecidesLikeMemoryStore(t *testing.T) {
	srv := redistest.Start(t)
	rules := []httplimit.Rule{
		hsPerIP(0.01, 5),
		{Name: "per-path", LimitKeys: []string{"path"}, Rate: 0.01, Burst: 8},
	}
	mem := httplimit.NewMemoryStore(httplimit.MemoryOptions{})
	defer mem.Close()
	lm := hsLimiter(t, mem, rules...)
	lr := hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{}), rules...)
	ips := []string{"198.51.100.1", "198.51.100.2", "198.51.100.1", "198.51.100.3"}
	for i := range 24 {
		ip := ips[i%len(ips)]
		a, b := hsCheck(lm, ip), hsCheck(lr, ip)
		if a.Allowed != b.Allowed || a.Status != b.Status || a.DeniedBy != b.DeniedBy || len(a.Policies) != len(b.Policies) {
			t.Fatalf("request %d from %s: memory %+v, redis %+v", i, ip, a, b)
		}
		for j := range a.Policies {
			pa, pb := a.Policies[j], b.Policies[j]
			if int(pa.Remaining) != int(pb.Remaining) || pa.Denied != pb.Denied || pa.Quota != pb.Quota {
				t.Fatalf("request %d, rule %s: memory %+v, redis %+v", i, pa.Name, pa, pb)
			}
		}
	}
}

// A rule keeps its buckets in Redis across a new store (a restart) when its
// ID is unchanged, and a changed rule starts with full buckets, on a reload
// too: the store's Limiters are not engine.Retuners.
func TestStoreBucketsFollowTheRuleID(t *testing.T) {
	if _, ok := any(&Limiter{}).(engine.Retuner); ok {
		t.Fatal("Limiter is an engine.Retuner")
	}
	srv := redistest.Start(t)
	drain := func(l *httplimit.Middleware) (n int) {
		for hsCheck(l, "198.51.100.9").Allowed {
			n++
		}
		return n
	}
	if n := drain(hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{}), hsPerIP(0.001, 3))); n != 3 {
		t.Fatalf("first drain admitted %d, want 3", n)
	}
	if n := drain(hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{}), hsPerIP(0.001, 3))); n != 0 {
		t.Errorf("same rule on a new store admitted %d, want 0: the drained bucket is in Redis", n)
	}
	if n := drain(hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{}), hsPerIP(0.001, 4))); n != 4 {
		t.Errorf("changed rule admitted %d, want a full bucket of 4", n)
	}
	if n := drain(hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{Prefix: "other:"}), hsPerIP(0.001, 3))); n != 3 {
		t.Errorf("same rule under another prefix admitted %d, want 3", n)
	}
	l := hsLimiter(t, hsStore(t, srv.Addr(), StoreOptions{Prefix: "reload:"}), hsPerIP(0.001, 3))
	drain(l)
	if err := l.Reload([]httplimit.Rule{hsPerIP(0.001, 5)}); err != nil {
		t.Fatal(err)
	}
	if n := drain(l); n != 5 {
		t.Errorf("rule reloaded with another burst admitted %d, want a full bucket of 5", n)
	}
}

// Keys are escaped: a client cannot reach another client's bucket, nor
// choose a hash tag, with braces or percent signs in its key.
func TestStoreKeysCannotCollide(t *testing.T) {
	srv := redistest.Start(t)
	s := hsStore(t, srv.Addr(), StoreOptions{})
	h, err := s.Bind(engine.Spec{ID: "k#0000000000000001", Name: "k", Limit: 0.001, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(h)
	ctx := context.Background()
	out := make([]engine.Decision, 1)
	for _, key := range []string{"a", "{a}", "%7Ba%7D", "%257Ba%257D", "x{a}", "{a", "a}", "", "{}"} {
		denied, err := h.TakeAll(ctx, []engine.Take{{Limiter: h, Key: key, N: 1}}, out)
		if err != nil || denied != -1 || !out[0].Allowed {
			t.Errorf("first take of %q: denied %d, %v, %+v; want a full bucket of its own", key, denied, err, out[0])
		}
	}
	// And each of them is now drained.
	for _, key := range []string{"a", "{a}", "%7Ba%7D"} {
		if denied, err := h.TakeAll(ctx, []engine.Take{{Limiter: h, Key: key, N: 1}}, out); err != nil || denied != 0 {
			t.Errorf("second take of %q: denied %d, %v; want 0", key, denied, err)
		}
	}
}

// TakeAll over several rules is all or nothing, and reports as the memory
// store does: the denied take, with nothing taken from the others.
func TestStoreTakeAllIsAllOrNothing(t *testing.T) {
	srv := redistest.Start(t)
	s := hsStore(t, srv.Addr(), StoreOptions{})
	big, _ := s.Bind(engine.Spec{ID: "big#1", Name: "big", Limit: 0.001, Burst: 10})
	small, _ := s.Bind(engine.Spec{ID: "small#1", Name: "small", Limit: 0.001, Burst: 2})
	ctx := context.Background()
	out := make([]engine.Decision, 2)
	takes := []engine.Take{{Limiter: big, Key: "u", N: 1}, {Limiter: small, Key: "u", N: 1}}
	for i := range 2 {
		if denied, err := big.TakeAll(ctx, takes, out); err != nil || denied != -1 {
			t.Fatalf("take %d: denied %d, %v", i, denied, err)
		}
	}
	denied, err := big.TakeAll(ctx, takes, out)
	if err != nil || denied != 1 || out[0].Allowed || out[1].Allowed || out[1].RetryAfter <= 0 {
		t.Fatalf("third take: denied %d, %v, %+v; want take 1 denied", denied, err, out)
	}
	// big gave back its token: it holds 8, not 7.
	if _, err := big.TakeAll(ctx, takes[:1], out); err != nil || int(out[0].Remaining) != 7 {
		t.Errorf("big after the denied call and one more take: %+v, %v; want 7 left", out[0], err)
	}
	// A cost above a burst is never satisfiable.
	takes[1].N = 3
	if denied, err := big.TakeAll(ctx, takes, out); err != nil || denied != 1 || out[1].RetryAfter != engine.InfDuration {
		t.Errorf("cost above burst: denied %d, %v, %+v", denied, err, out[1])
	}
	if denied, err := big.TakeAll(ctx, nil, nil); err != nil || denied != -1 {
		t.Errorf("no takes: %d, %v", denied, err)
	}
}

// Binding an ID twice gives the same Limiter; it goes only when both binds
// are released, and its buckets stay in Redis.
func TestStoreBindRelease(t *testing.T) {
	srv := redistest.Start(t)
	s := hsStore(t, srv.Addr(), StoreOptions{})
	lim := engine.Spec{ID: "r#2", Name: "r", Limit: 0.001, Burst: 1}
	h1, _ := s.Bind(lim)
	h2, _ := s.Bind(lim)
	if h1 != h2 {
		t.Fatal("two binds of one ID gave different Limiters")
	}
	h1.Take(context.Background(), "k", 1)
	s.Release(h1)
	if h3, _ := s.Bind(lim); h3 != h1 {
		t.Error("rebinding while one bind is held gave a new Limiter")
	} else {
		s.Release(h3)
	}
	s.Release(h2)
	// A take in flight with a released handle still works.
	if d, err := h1.Take(context.Background(), "k", 1); err != nil || d.Allowed {
		t.Errorf("take with a released Limiter: %+v, %v; want the drained bucket's denial", d, err)
	}
	h4, _ := s.Bind(lim)
	if h4 == h1 {
		t.Error("bind after every release gave the old Limiter")
	}
	if d, _ := h4.Take(context.Background(), "k", 1); d.Allowed {
		t.Error("a new bind of the ID did not find its bucket in Redis")
	}
}

// When Redis is gone, TakeAll returns an error and each rule's fail_mode
// decides: "open" admits, "closed" answers 503, and the default, fallback,
// lets the local engines decide at FallbackShare of the limit; the errors,
// which wrap engine.ErrFallback, still reach OnStoreError.
func TestStoreFailure(t *testing.T) {
	srv := redistest.Start(t)
	open := hsPerIP(0.001, 4)
	open.FailMode = "open"
	closed := httplimit.Rule{Name: "closed", LimitKeys: []string{"path"}, Rate: 0.001, Burst: 4, FailMode: "closed"}
	opts := StoreOptions{Timeout: 200 * time.Millisecond}
	lo := hsLimiter(t, hsStore(t, srv.Addr(), opts), open)
	lc := hsLimiter(t, hsStore(t, srv.Addr(), opts), closed)
	var fallbackErrs atomic.Int64
	fb := opts
	fb.FallbackShare = 0.5
	lf := hsLimiterOpts(t, httplimit.Options{Store: hsStore(t, srv.Addr(), fb), OnStoreError: func(err error) {
		if errors.Is(err, engine.ErrFallback) {
			fallbackErrs.Add(1)
		}
	}}, hsPerIP(0.001, 4))
	if !hsCheck(lo, "198.51.100.1").Allowed || !hsCheck(lc, "198.51.100.1").Allowed || !hsCheck(lf, "198.51.100.2").Allowed {
		t.Fatal("not admitted while Redis is up")
	}
	srv.Kill()
	for i := range 10 {
		if res := hsCheck(lo, "198.51.100.1"); !res.Allowed || res.Status != 200 || !res.Policies[0].Unknown {
			t.Errorf("fail_mode open, request %d: %+v", i, res)
		}
		if res := hsCheck(lc, "198.51.100.1"); res.Allowed || res.Status != 503 || res.RetryAfter != 1 {
			t.Errorf("fail_mode closed, request %d: %+v", i, res)
		}
	}
	admitted := 0
	for range 10 {
		if res := hsCheck(lf, "198.51.100.3"); res.Allowed {
			admitted++
		} else if res.Status != 429 {
			t.Errorf("fallback denial: %+v, want 429", res)
		}
	}
	if admitted != 2 || fallbackErrs.Load() != 10 {
		t.Errorf("fallback at share 0.5 of burst 4 admitted %d of 10 (want 2), OnStoreError heard %d fallback errors (want 10)",
			admitted, fallbackErrs.Load())
	}
}

// Bad options fail the constructor with an error naming the field; a rule
// the store cannot hold fails its Bind.
func TestStoreBadOptions(t *testing.T) {
	if _, err := NewStore(nil, StoreOptions{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil client: %v", err)
	}
	if _, err := NewStoreGoRedis(nil, StoreOptions{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil go-redis client: %v", err)
	}
	// A client that is never used: construction does not dial.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, tc := range []struct {
		opts StoreOptions
		want string
	}{
		{StoreOptions{Prefix: "a{b"}, "Prefix"},
		{StoreOptions{Timeout: -time.Second}, "Timeout"},
		{StoreOptions{FallbackShare: 1.5}, "FallbackShare"},
		{StoreOptions{FallbackShare: -1}, "FallbackShare"},
		{StoreOptions{BreakFor: -1}, "BreakFor"},
	} {
		_, err := NewStoreGoRedis(rdb, tc.opts)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an invalid-config error naming %s", tc.opts, err, tc.want)
		}
	}
	s, err := NewStoreGoRedis(rdb, StoreOptions{FallbackShare: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Bind(engine.Spec{ID: "tiny#3", Name: "tiny", Limit: 1, Burst: 5}); err == nil || !strings.Contains(err.Error(), `"tiny"`) {
		t.Errorf("fallback burst 0.5 token: %v, want an error naming the rule", err)
	}
}

// On a Redis Cluster the store works unchanged: two limiters on their own
// cluster clients share two rules whose buckets lie in different slots, and
// together admit exactly the smaller burst.
func TestStoreOnCluster(t *testing.T) {
	nodes := redistest.StartCluster(t)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	rules := []httplimit.Rule{
		hsPerIP(1.0/86400, 7),
		{Name: "per-path", LimitKeys: []string{"path"}, Rate: 1.0 / 86400, Burst: 100},
	}
	if slotOf("{198.51.100.20}") == slotOf("{/x}") {
		t.Fatal("the two rules' keys share a slot; pick others")
	}
	opts := StoreOptions{Timeout: 10 * time.Second}
	var limiters []*httplimit.Middleware
	for range 2 {
		s, err := NewStore(newRue(t, addrs...), opts)
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, hsLimiter(t, s, rules...))
	}
	admitted := 0
	for i := range 20 {
		res := hsCheck(limiters[i%2], "198.51.100.20")
		if res.Allowed {
			admitted++
		} else if res.Status != 429 || res.DeniedBy != "per-ip" {
			t.Errorf("request %d: %+v, want admitted or denied by per-ip", i, res)
		}
	}
	if admitted != 7 {
		t.Errorf("admitted %d of 20 across two instances, want the per-ip burst, 7", admitted)
	}
	// The denied requests gave back their per-path tokens: 100 - 7 left.
	if res := hsCheck(limiters[0], "198.51.100.21"); !res.Allowed || int(res.Policies[1].Remaining) != 92 {
		t.Errorf("another address: %+v, want admitted with 92 per-path tokens left", res)
	}
}

// With leases, two instances on one Redis still enforce one limit: together
// they admit at most the burst of a rule whose refill is negligible.
func TestStoreLeasedSharesOneLimit(t *testing.T) {
	srv := redistest.Start(t)
	const burst = 40
	rule := hsPerIP(1.0/86400, burst)
	opts := StoreOptions{Lease: &LeaseOptions{}}
	limiters := []*httplimit.Middleware{
		hsLimiter(t, hsStore(t, srv.Addr(), opts), rule),
		hsLimiter(t, hsStore(t, srv.Addr(), opts), rule),
	}
	got := raceChecks(t, limiters, "198.51.100.7")
	if got > burst || got < burst/2 {
		t.Errorf("admitted %d of 160 through leases, want at most the burst, %d (and most of it)", got, burst)
	}
	t.Logf("admitted %d of the burst of %d", got, burst)
	if _, err := NewStore(newRue(t, srv.Addr()), StoreOptions{Lease: &LeaseOptions{MaxShare: 2}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewStore with LeaseOptions.MaxShare 2: %v, want ErrInvalidConfig", err)
	}
}

// raceChecks makes 160 checks from ip, 8 goroutines alternating between
// limiters, and returns how many were admitted; every other must be a 429
// with a Retry-After.
func raceChecks(t *testing.T, limiters []*httplimit.Middleware, ip string) int64 {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				res := hsCheck(limiters[(g+i)%len(limiters)], ip)
				switch {
				case res.Allowed:
					admitted.Add(1)
				case res.Status != 429 || res.RetryAfter <= 0:
					t.Errorf("neither admitted nor a 429 with Retry-After: %+v", res)
				}
			}
		})
	}
	wg.Wait()
	return admitted.Load()
}
