package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/engine/limitertest"
	"github.com/faucetgo/faucet/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

// TestSlotConformance runs the in-flight slot suite against a real
// redis-server, through each client: every Open is another instance's
// Store on the same server and Prefix.
func TestSlotConformance(t *testing.T) {
	srv := redistest.Start(t)
	opts := StoreOptions{Prefix: "slots:", Timeout: 10 * time.Second, Heartbeat: -1, SlotTTL: time.Second}
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (*Store, error)
	}{
		{"rueidis", func(t *testing.T) (*Store, error) { return NewStore(newRue(t, srv.Addr()), opts) }},
		{"go-redis", func(t *testing.T) (*Store, error) { return NewStoreGoRedis(newGoRedis(t, srv.Addr()), opts) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limitertest.RunSlots(t, limitertest.SlotHarness{
				Open: func(t *testing.T) engine.SlotStore {
					s, err := tc.open(t)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { s.Close() })
					return s
				},
			})
		})
	}
}

// The slots of a key are one sorted set under the Prefix and the name,
// whose members are the holders, and which expires with its last slot.
func TestSlotKeys(t *testing.T) {
	srv := redistest.Start(t)
	s := hsStore(t, srv.Addr(), StoreOptions{Prefix: "p:", Heartbeat: -1, SlotTTL: 5 * time.Second})
	sl, err := s.BindSlots("rule{1}")
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	ctx := context.Background()
	if ok, _, err := sl.Acquire(ctx, "user{a}", "h1", 2); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	keys := admin(t, srv.Addr(), "KEYS", "p:*").([]any)
	if len(keys) != 1 {
		t.Fatalf("keys %v, want one", keys)
	}
	k := keys[0].(string)
	if want := "p:rule%7B1%7D:inflight:{user%7Ba%7D}"; k != want {
		t.Errorf("key %q, want %q", k, want)
	}
	if m := admin(t, srv.Addr(), "ZRANGE", k, "0", "-1").([]any); len(m) != 1 || m[0] != "h1" {
		t.Errorf("members %v, want [h1]", m)
	}
	if ms := admin(t, srv.Addr(), "PTTL", k).(int64); ms <= 0 || ms > 5000 {
		t.Errorf("PTTL %d ms, want up to the SlotTTL, 5000", ms)
	}
	if err := sl.Release(ctx, "user{a}", "h1"); err != nil {
		t.Fatal(err)
	}
	if n := admin(t, srv.Addr(), "EXISTS", k).(int64); n != 0 {
		t.Errorf("the key exists after its last slot was released")
	}
}

// Renew renews more slots than one script holds, in several scripts.
func TestSlotRenewMany(t *testing.T) {
	srv := redistest.Start(t)
	s := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1, SlotTTL: 5 * time.Second})
	sl, err := s.BindSlots("many")
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	ctx := context.Background()
	n := 2*maxRenewKeys + 7
	holds := make([]engine.SlotHold, n)
	for i := range holds {
		holds[i] = engine.SlotHold{Key: "k" + strconv.Itoa(i%300), Holder: "h" + strconv.Itoa(i)}
		if ok, _, err := sl.Acquire(ctx, holds[i].Key, holds[i].Holder, 10); !ok || err != nil {
			t.Fatalf("Acquire %d = %v, %v", i, ok, err)
		}
	}
	admin(t, srv.Addr(), "PEXPIRE", sl.(*Slots).l.KeyFor("k0"), "100")
	for _, k := range []string{"k1", "k299"} {
		admin(t, srv.Addr(), "PEXPIRE", sl.(*Slots).l.KeyFor(k), "100")
	}
	before := sl.(*Slots).l.Stats().Scripts
	if err := sl.Renew(ctx, holds); err != nil {
		t.Fatal(err)
	}
	if got := sl.(*Slots).l.Stats().Scripts - before; got != 3 {
		t.Errorf("Renew of %d slots sent %d scripts, want 3", n, got)
	}
	for _, k := range []string{"k0", "k1", "k299"} {
		if ms := admin(t, srv.Addr(), "PTTL", sl.(*Slots).l.KeyFor(k)).(int64); ms < 1000 {
			t.Errorf("%s: PTTL %d ms after Renew, want the SlotTTL", k, ms)
		}
	}
}

// A store that cannot be reached fails every call with an error wrapping
// engine.ErrUnavailable, and a server killed mid use with one wrapping it
// or engine.ErrOutcomeUnknown; nothing is admitted, and the slots come
// back when the server does.
func TestSlotStoreFails(t *testing.T) {
	ctx := context.Background()
	dead := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	c := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s, err := NewStoreGoRedis(c, StoreOptions{Heartbeat: -1, Timeout: 5 * time.Second, BreakAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sl, err := s.BindSlots("down")
	if err != nil {
		t.Fatal(err)
	}
	ok, _, err := sl.Acquire(ctx, "k", "h", 1)
	if ok || !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Acquire on a dead port = %v, %v; want an error wrapping engine.ErrUnavailable", ok, err)
	}
	if err := sl.Release(ctx, "k", "h"); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Release on a dead port: %v, want an error wrapping engine.ErrUnavailable", err)
	}
	if err := sl.Renew(ctx, []engine.SlotHold{{Key: "k", Holder: "h"}}); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Renew on a dead port: %v, want an error wrapping engine.ErrUnavailable", err)
	}

	srv := redistest.Start(t)
	live := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1, Timeout: time.Second, BreakAfter: -1})
	sl, err = live.BindSlots("killed")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := sl.Acquire(ctx, "k", "h1", 1); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	srv.Kill()
	unavailable := 0
	for i := range 5 {
		ok, _, err := sl.Acquire(ctx, "k", "x"+strconv.Itoa(i), 5)
		if ok || err == nil {
			t.Fatalf("Acquire with the server down = %v, %v; want an error", ok, err)
		}
		if !errors.Is(err, engine.ErrUnavailable) && !errors.Is(err, engine.ErrOutcomeUnknown) {
			t.Fatalf("Acquire with the server down: %v, want engine.ErrUnavailable or engine.ErrOutcomeUnknown", err)
		}
		if errors.Is(err, engine.ErrUnavailable) {
			unavailable++
		}
	}
	if unavailable == 0 {
		t.Errorf("no Acquire with the server down wrapped engine.ErrUnavailable, though dials were refused")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, held, err := sl.Acquire(ctx, "k", "h2", 1)
		if err == nil {
			// The restarted server is empty: h1's slot went with it.
			if !ok || held != 1 {
				t.Errorf("Acquire after the restart = %v, %d; want admitted, 1", ok, held)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not come back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSlotTTLIsChecked(t *testing.T) {
	srv := redistest.Start(t)
	for _, ttl := range []time.Duration{-time.Second, time.Millisecond, 999 * time.Millisecond, time.Hour + 1} {
		_, err := NewStore(newRue(t, srv.Addr()), StoreOptions{Heartbeat: -1, SlotTTL: ttl})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "SlotTTL") || !strings.Contains(err.Error(), "1s to 1h0m0s") {
			t.Errorf("SlotTTL %v: %v, want an error naming SlotTTL and its range", ttl, err)
		}
	}
	for ttl, want := range map[time.Duration]time.Duration{0: engine.DefaultSlotTTL, time.Second: time.Second, time.Hour: time.Hour} {
		s := hsStore(t, srv.Addr(), StoreOptions{Heartbeat: -1, SlotTTL: ttl})
		sl, err := s.BindSlots("ttl")
		if err != nil {
			t.Fatal(err)
		}
		if sl.TTL() != want {
			t.Errorf("SlotTTL %v: TTL() = %v, want %v", ttl, sl.TTL(), want)
		}
		sl.Close()
	}
}

// On a cluster, each acquire's one key lies in one hash slot, and Renew
// sends a script per hash slot: keys spread over the cluster's nodes are
// acquired, renewed and released without CROSSSLOT errors, by both
// clients.
func TestSlotsOnCluster(t *testing.T) {
	nodes := redistest.StartCluster(t)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	gor := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { gor.Close() })
	opts := StoreOptions{Heartbeat: -1, Timeout: 10 * time.Second, SlotTTL: 10 * time.Second}
	sr, err := NewStore(newRue(t, addrs...), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	sg, err := NewStoreGoRedis(gor, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sg.Close()
	ctx := context.Background()
	for _, st := range []*Store{sr, sg} {
		sl, err := st.BindSlots("cluster")
		if err != nil {
			t.Fatal(err)
		}
		var holds []engine.SlotHold
		slots := map[int]bool{}
		for i := range 12 {
			h := engine.SlotHold{Key: "user" + strconv.Itoa(i), Holder: "h"}
			slots[slotOf(sl.(*Slots).l.KeyFor(h.Key))] = true
			if ok, held, err := sl.Acquire(ctx, h.Key, h.Holder, 1); !ok || held != 1 || err != nil {
				t.Fatalf("Acquire(%q) = %v, %d, %v; want admitted, 1", h.Key, ok, held, err)
			}
			holds = append(holds, h)
		}
		if len(slots) < 6 {
			t.Fatalf("keys fall in only %d slots", len(slots))
		}
		if err := sl.Renew(ctx, holds); err != nil {
			t.Fatalf("Renew across slots: %v", err)
		}
		for _, h := range holds {
			if ok, _, err := sl.Acquire(ctx, h.Key, "other", 1); ok || err != nil {
				t.Errorf("Acquire(%q) by another = %v, %v; want denied", h.Key, ok, err)
			}
			if err := sl.Release(ctx, h.Key, h.Holder); err != nil {
				t.Fatal(err)
			}
		}
		sl.Close()
	}
}
