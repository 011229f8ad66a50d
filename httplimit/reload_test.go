package httplimit_test

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

// ipRule is a rule with one bucket per client address.
func ipRule(name string, rate, burst float64) httplimit.Rule {
	return httplimit.Rule{Name: name, LimitKeys: []string{"ip:address"}, Rate: rate, Burst: burst}
}

// checkOne checks one request of the client 192.0.2.1 and returns the
// policy of the first rule.
func checkOne(t *testing.T, l *httplimit.Middleware) httplimit.Policy {
	t.Helper()
	res := l.Check(req("192.0.2.1:1", "/"))
	if len(res.Policies) == 0 {
		t.Fatal("no rule applied")
	}
	p := res.Policies[0]
	if p.Denied == res.Allowed {
		t.Fatalf("policy %+v disagrees with the result %+v", p, res)
	}
	return p
}

// drain checks requests of the client 192.0.2.1 at the clock's time until
// one is denied, and returns how many were allowed.
func drain(t *testing.T, l *httplimit.Middleware) int {
	t.Helper()
	for n := 0; n < 1000; n++ {
		if p := checkOne(t, l); p.Denied {
			return n
		}
	}
	t.Fatal("more than 1000 requests allowed at one instant")
	return 0
}

// A reload that changes a rule's rate or burst keeps its buckets: each holds
// the tokens it had at the reload, capped at a smaller burst, and refills at
// the new rate from then on. Before, the rule restarted with full buckets.
func TestReloadChangedLimitKeepsTokens(t *testing.T) {
	for _, tc := range []struct {
		name        string
		rate, burst float64
		// first is Remaining after one request at the reload; after
		// waiting wait, one more request leaves second, and then exactly
		// floor(second) more pass.
		first  float64
		wait   time.Duration
		second float64
	}{
		{"rate up", 20, 20, 4, 500 * time.Millisecond, 13},
		{"rate down", 2, 20, 4, 500 * time.Millisecond, 4},
		{"burst up", 10, 40, 4, 3 * time.Second, 33},
		{"burst up, refill capped at the new burst", 10, 40, 4, time.Minute, 39},
		{"burst down above the tokens", 10, 12, 4, time.Second, 11},
		{"burst down below the tokens", 1, 3, 2, 500 * time.Millisecond, 1.5},
		{"both up", 40, 100, 4, time.Second, 43},
		{"both down", 5, 15, 4, 400 * time.Millisecond, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, clk := newRuleLimiter(t, httplimit.Options{}, ipRule("per-ip", 10, 20))
			if n := drain(t, l); n != 20 {
				t.Fatalf("a new client got %d requests, want the burst, 20", n)
			}
			clk.Add(500 * time.Millisecond) // 5 tokens at 10/s
			if err := l.Reload([]httplimit.Rule{ipRule("per-ip", tc.rate, tc.burst)}); err != nil {
				t.Fatal(err)
			}
			p := checkOne(t, l)
			if p.Denied || p.Remaining != tc.first || p.Quota != int64(tc.burst) {
				t.Errorf("at the reload: allowed %v, Remaining %v, Quota %d; want allowed, %v, %v (the 5 tokens kept, capped at the burst)",
					!p.Denied, p.Remaining, p.Quota, tc.first, tc.burst)
			}
			clk.Add(tc.wait)
			p = checkOne(t, l)
			if p.Denied || p.Remaining != tc.second {
				t.Errorf("%v later: allowed %v, Remaining %v; want allowed, %v (refilled at the new rate from the reload)",
					tc.wait, !p.Denied, p.Remaining, tc.second)
			}
			if n, want := drain(t, l), int(math.Floor(tc.second)); n != want {
				t.Errorf("then %d more passed, want %d", n, want)
			}
		})
	}
}

// A rule with another name or other limit_keys names other buckets: they
// start full, whatever the rule's rate and burst, and the counters follow
// the name.
func TestReloadNewIdentityStartsFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule httplimit.Rule
	}{
		{"renamed", ipRule("per-client", 10, 20)},
		{"renamed with a new rate", ipRule("per-client", 5, 20)},
		{"other limit_keys", httplimit.Rule{Name: "per-ip", LimitKeys: []string{"ip:address", "header:x-a"}, Rate: 10, Burst: 20}},
		{"other limit_keys and burst", httplimit.Rule{Name: "per-ip", LimitKeys: []string{"path"}, Rate: 10, Burst: 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newRuleLimiter(t, httplimit.Options{}, ipRule("per-ip", 10, 20))
			drain(t, l)
			if err := l.Reload([]httplimit.Rule{tc.rule}); err != nil {
				t.Fatal(err)
			}
			if n := drain(t, l); n != int(tc.rule.Burst) {
				t.Errorf("after the reload %d requests passed, want a full bucket, %v", n, tc.rule.Burst)
			}
			st := l.Stats()[0]
			if wantAllowed := uint64(20 + tc.rule.Burst); tc.rule.Name == "per-ip" && (st.Allowed != wantAllowed || st.Denied != 2) {
				t.Errorf("counters %+v, want %d allowed and 2 denied under the kept name", st, wantAllowed)
			} else if tc.rule.Name != "per-ip" && (st.Allowed != uint64(tc.rule.Burst) || st.Denied != 1) {
				t.Errorf("counters %+v, want only the new name's", st)
			}
		})
	}
}

// failingBind wraps a store and fails Bind for the rule named fail.
type failingBind struct {
	*engine.Pool
	fail string
}

func (s *failingBind) Bind(spec engine.Spec) (engine.Limiter, error) {
	if spec.Name == s.fail {
		return nil, errors.New("store refuses")
	}
	return s.Pool.Bind(spec)
}

// A reload that fails, in validation or in the store, changes nothing: the
// old rate and burst stay in force and the buckets keep their tokens.
func TestReloadFailureChangesNothing(t *testing.T) {
	store := &failingBind{Pool: httplimit.NewMemoryStore(httplimit.MemoryOptions{SweepInterval: -1}), fail: "boom"}
	defer store.Close()
	l, clk := newRuleLimiter(t, httplimit.Options{Store: store}, ipRule("per-ip", 10, 20),
		httplimit.Rule{Name: "other", LimitKeys: []string{"path"}, Rate: 1000, Burst: 1000})
	drain(t, l)
	clk.Add(500 * time.Millisecond) // 5 tokens
	changed := ipRule("per-ip", 100, 200)
	boom := httplimit.Rule{Name: "boom", LimitKeys: []string{"header:x-b"}, Rate: 1, Burst: 1}
	for _, tc := range []struct {
		name  string
		rules []httplimit.Rule
		store bool // the store refuses, not validation
	}{
		{"invalid rule", []httplimit.Rule{changed, {Name: "bad", LimitKeys: []string{"bogus"}, Rate: 1, Burst: 1}}, false},
		{"store refuses a later rule", []httplimit.Rule{changed, boom}, true},
		{"store refuses an earlier rule", []httplimit.Rule{boom, changed}, true},
	} {
		err := l.Reload(tc.rules)
		var ce *httplimit.ConfigError
		if err == nil || errors.As(err, &ce) == tc.store {
			t.Fatalf("%s: Reload: %v", tc.name, err)
		}
	}
	if got := l.Rules(); len(got) != 2 || got[0].Rate != 10 || got[0].Burst != 20 {
		t.Errorf("Rules() = %+v, want the old rules", got)
	}
	if p := checkOne(t, l); p.Denied || p.Remaining != 4 || p.Quota != 20 {
		t.Errorf("after the failed reloads: %+v, want allowed with 4 left of 20", p)
	}
	clk.Add(500 * time.Millisecond)
	if p := checkOne(t, l); p.Remaining != 8 {
		t.Errorf("500ms later: Remaining %v, want 8 (refilled at the old rate, 10/s)", p.Remaining)
	}
}

// Reloads that flip a rule between two limits while requests are checked
// never let more through than the limits allow: the first burst plus, for
// each span between reloads, the rate in force. Before, each reload gave
// every bucket a full burst again. The limit of the last reload is then in
// force.
func TestReloadFlippingLimitsUnderLoad(t *testing.T) {
	const (
		reloads  = 200
		step     = time.Millisecond
		checkers = 4
	)
	slow, fast := ipRule("global", 10, 10), ipRule("global", 50, 50)
	slow.LimitKeys, fast.LimitKeys = []string{"method"}, []string{"method"}
	l, clk := newRuleLimiter(t, httplimit.Options{}, slow)
	var (
		stop     atomic.Bool
		admitted atomic.Int64
		wg       sync.WaitGroup
	)
	for range checkers {
		wg.Go(func() {
			for !stop.Load() {
				if l.Check(req("192.0.2.1:1", "/")).Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	var reloadErr error
	refill, inForce := 0.0, slow
	for i := range reloads {
		clk.Add(step)
		refill += inForce.Rate * step.Seconds()
		if inForce = slow; i%2 == 0 {
			inForce = fast
		}
		if reloadErr = l.Reload([]httplimit.Rule{inForce}); reloadErr != nil {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if reloadErr != nil {
		t.Fatal(reloadErr)
	}
	// What is left at the end counts too. Tokens are only ever lost to a
	// lowered burst or to rounding (0.001 a change), never below the first
	// burst less one.
	n := admitted.Load() + int64(drain(t, l))
	if most := int64(math.Floor(slow.Burst + refill + 1e-9)); n > most || n < int64(slow.Burst)-1 {
		t.Errorf("%d requests admitted over %v, want from %v to %d (the burst, %v, and the refill at the rates in force, %v)",
			n, reloads*step, slow.Burst-1, most, slow.Burst, refill)
	}
	// The last reload set the slow limit: 10/s, so 100 ms refill 1 token.
	clk.Add(100 * time.Millisecond)
	if got := drain(t, l); got != 1 {
		t.Errorf("100ms after the last reload %d passed, want 1 (10/s)", got)
	}
	if got := l.Rules()[0].Rate; got != slow.Rate {
		t.Errorf("rate in force %v, want %v", got, slow.Rate)
	}
}

// recordingStore is a store that records the Specs bound.
type recordingStore struct {
	*engine.Pool
	specs []engine.Spec
}

func (s *recordingStore) Bind(spec engine.Spec) (engine.Limiter, error) {
	s.specs = append(s.specs, spec)
	return s.Pool.Bind(spec)
}

// The ID of a rule leaves its rate and burst out. With Limiters that can
// retune (the memory store's) a changed rate or burst keeps the buckets'
// tokens; with others (as redisstore's) the store keeps the new limit's
// buckets apart and the rule starts with full ones.
func TestReloadWithoutRetunerStartsFull(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plain   bool
		drained int
	}{
		{"retuner", false, 5},
		{"not a retuner", true, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := httplimit.NewMemoryStore(httplimit.MemoryOptions{SweepInterval: -1})
			if tc.plain {
				pool = engine.NewPool(func(spec engine.Spec) (engine.Limiter, error) {
					e, err := engine.New(engine.Config{Limit: spec.Limit, Burst: spec.Burst, SweepInterval: -1})
					return &opaque{e: e}, err
				})
			}
			rec := &recordingStore{Pool: pool}
			defer rec.Close()
			l, clk := newRuleLimiter(t, httplimit.Options{Store: rec}, ipRule("per-ip", 10, 20))
			drain(t, l)
			clk.Add(500 * time.Millisecond)
			if err := l.Reload([]httplimit.Rule{ipRule("per-ip", 10, 40)}); err != nil {
				t.Fatal(err)
			}
			if rec.specs[0].ID != rec.specs[1].ID {
				t.Errorf("IDs %q and %q differ: a change of burst renamed the rule's buckets", rec.specs[0].ID, rec.specs[1].ID)
			}
			if n := drain(t, l); n != tc.drained {
				t.Errorf("after the reload %d passed, want %d", n, tc.drained)
			}
		})
	}
}
