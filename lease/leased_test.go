package lease

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// slowStore is a store whose buckets never run short and whose every call
// takes a round trip of rtt: what a remote store looks like to the layer
// when the limit does not bind.
type slowStore struct {
	rtt             time.Duration
	grants, ends    atomic.Int64
	granted, giveBk atomic.Int64
}

func (s *slowStore) Limit() engine.Limit { return 1e9 }
func (s *slowStore) Burst() float64      { return 1e9 }

func (s *slowStore) GrantLease(_ context.Context, _ string, r Request) (Grant, error) {
	time.Sleep(s.rtt)
	s.grants.Add(1)
	if r.Prev != "" {
		s.ends.Add(1)
		s.giveBk.Add(int64(r.Unspent))
	}
	s.granted.Add(int64(r.Want))
	now := time.Now().UnixMicro()
	return Grant{Now: now, Quanta: r.Want, Expiry: now + r.TTL.Microseconds()}, nil
}

func (s *slowStore) ReleaseLease(_ context.Context, _, _ string, unspent uint64) (Grant, bool, error) {
	time.Sleep(s.rtt)
	s.ends.Add(1)
	s.giveBk.Add(int64(unspent))
	return Grant{Now: time.Now().UnixMicro()}, true, nil
}

func (s *slowStore) FailLease(string, float64, error) (engine.Decision, error) {
	return engine.Decision{}, nil
}

// One caller cycling over more keys than its checks reach within the
// demand horizon, on a store with a slow round trip, still decides most
// checks locally: a lease that runs out while live makes the next one twice
// as large (the waits hide the demand), and a lease checks moved on from
// ends with the next grant, not with a call of its own.
func TestLeasedGrowsLeasesTheWaitsHide(t *testing.T) {
	st := &slowStore{rtt: 500 * time.Microsecond}
	s, err := New(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const keys, checks = 60, 30_000
	names := make([]string, keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	for i := range checks {
		if d, err := s.Take(context.Background(), names[i%keys], 1); err != nil || !d.Allowed {
			t.Fatalf("check %d: %+v, %v", i, d, err)
		}
	}
	calls := st.grants.Load() + int64(s.Stats().Releases)
	t.Logf("%d checks over %d keys: %d grants, %d releases, %d waited", checks, keys, st.grants.Load(), s.Stats().Releases, s.Stats().Waited)
	if calls > checks/20 {
		t.Errorf("%d checks made %d store calls, want at most 5%% (leases too small for the demand)", checks, calls)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Every quantum granted was spent or given back: nothing stranded.
	if left := st.granted.Load() - st.giveBk.Load() - checks*1000; left != 0 {
		t.Errorf("granted less given back less spent = %d quanta, want 0 after Close", left)
	}
}

// Bad options are errors naming the field and its range, wrapping
// ErrInvalidOptions and engine.ErrInvalidConfig; a nil store is an error.
func TestOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Lifetime: time.Millisecond}, "Lifetime must be at least 10ms, got 1ms"},
		{Options{MaxShare: 1.5}, "MaxShare must be in (0, 1], got 1.5"},
		{Options{MaxShare: -0.1}, "MaxShare must be in (0, 1], got -0.1"},
		{Options{MaxKeys: -1}, "MaxKeys must be positive, or 0 for the default, got -1"},
	} {
		err := tc.o.Check()
		if err == nil || !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.Check() = %v, want an error saying %q", tc.o, err, tc.want)
		}
		if _, err := New(&slowStore{}, tc.o); err == nil {
			t.Errorf("New with %+v: no error", tc.o)
		}
	}
	if err := (Options{}).Check(); err != nil {
		t.Errorf("the zero Options: %v", err)
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil): no error")
	}
}
