package limitertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// SlotHarness opens the stores whose in-flight slots RunSlots checks.
type SlotHarness struct {
	// Open returns a SlotStore as one more instance would open it: every
	// call in a test shares the slots of every other (one server, one
	// prefix), as the instances of a service do. The suite binds names of
	// its own, unique to the run. Its slots must expire after a TTL from
	// 1 to 3 s, for the expiry to be waited for. Open registers the
	// store's Close with t.Cleanup, and calls t.Skip with a sentence
	// naming what is missing when the store cannot be reached.
	Open func(t *testing.T) engine.SlotStore
	// Timeout bounds each subtest, as Harness.Timeout. 0 means 30 s.
	Timeout time.Duration
}

// RunSlots runs the in-flight slot conformance suite against h, one
// subtest per property, each with names of its own. It checks the
// semantics engine.Slots documents: up to max holders are admitted,
// exactly, and a holder that holds is admitted again without taking a
// second slot; Release frees a slot, and releasing what is not held does
// nothing; keys and names are independent; a slot not renewed is still
// held at TTL/2 and free after 2×TTL and a second; Renew keeps slots held
// past that, in one call for several keys, and takes no slot that is not
// held; goroutines acquiring through two stores, standing for two
// instances, never hold more than max together, and exactly max of many
// simultaneous acquirers are admitted; a lowered max denies until fewer
// are held, releasing nobody; and bad arguments are errors wrapping
// engine.ErrInvalidSlot. It sleeps about 4×TTL in all.
func RunSlots(t *testing.T, h SlotHarness) {
	if h.Open == nil {
		t.Fatal("limitertest: SlotHarness.Open is nil")
	}
	if h.Timeout == 0 {
		h.Timeout = 30 * time.Second
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var ids atomic.Int64
	for _, c := range slotCases {
		runCase(t, c.name, h.Timeout, func(t *testing.T, ctx context.Context) {
			c.run(&slotSuite{t: t, ctx: ctx, h: h, run: run, ids: &ids})
		})
	}
}

var slotCases = []struct {
	name string
	run  func(s *slotSuite)
}{
	{"AdmitsExactlyMax", slotsAdmitMax},
	{"ReleaseFrees", slotsReleaseFrees},
	{"ReleaseIsIdempotent", slotsReleaseIdempotent},
	{"KeysAndNamesAreIndependent", slotsIndependent},
	{"ExpireWithoutRenewal", slotsExpire},
	{"RenewKeepsSlotsHeld", slotsRenew},
	{"RenewTakesNothingBack", slotsRenewNoRetake},
	{"ConcurrentAcquirersNeverExceedMax", slotsConcurrent},
	{"SimultaneousAcquirersAdmitExactlyMax", slotsSimultaneous},
	{"LoweredMaxDeniesAndReleasesNobody", slotsLoweredMax},
	{"BadInputIsAnError", slotsBadInput},
}

// slotSuite is the state of one subtest of RunSlots.
type slotSuite struct {
	t   *testing.T
	ctx context.Context
	h   SlotHarness
	run string
	ids *atomic.Int64
}

// store opens one more instance's store.
func (s *slotSuite) store() engine.SlotStore {
	s.t.Helper()
	st := s.h.Open(s.t)
	if st == nil {
		s.t.Fatal("the harness's Open returned nil")
	}
	return st
}

// name is a limit name no other subtest or run uses.
func (s *slotSuite) name() string {
	return "slots-" + s.run + "-" + strconv.FormatInt(s.ids.Add(1), 10)
}

// bind binds name on st, closed when the subtest ends.
func (s *slotSuite) bind(st engine.SlotStore, name string) engine.Slots {
	s.t.Helper()
	sl, err := st.BindSlots(name)
	if err != nil {
		s.t.Fatalf("BindSlots(%q): %v", name, err)
	}
	if sl == nil {
		s.t.Fatalf("BindSlots(%q) returned nil", name)
	}
	s.t.Cleanup(func() { sl.Close() })
	return sl
}

// slots binds a new name on a new store.
func (s *slotSuite) slots() engine.Slots {
	s.t.Helper()
	return s.bind(s.store(), s.name())
}

// ttl is sl's TTL, checked to be short enough to wait for.
func (s *slotSuite) ttl(sl engine.Slots) time.Duration {
	s.t.Helper()
	ttl := sl.TTL()
	if ttl < time.Second || ttl > 3*time.Second {
		s.t.Fatalf("TTL() = %v, want 1 to 3 s: the harness must configure a short TTL", ttl)
	}
	return ttl
}

// acquire is sl.Acquire, failing the subtest on an error.
func (s *slotSuite) acquire(sl engine.Slots, key, holder string, max int) (bool, int) {
	s.t.Helper()
	ok, held, err := sl.Acquire(s.ctx, key, holder, max)
	if err != nil {
		s.t.Fatalf("Acquire(%q, %q, %d): %v", key, holder, max, err)
	}
	return ok, held
}

// want checks an Acquire's result.
func (s *slotSuite) want(sl engine.Slots, key, holder string, max int, wantOK bool, wantHeld int) {
	s.t.Helper()
	ok, held := s.acquire(sl, key, holder, max)
	if ok != wantOK || held != wantHeld {
		s.t.Errorf("Acquire(%q, %q, %d) = %v, %d; want %v, %d", key, holder, max, ok, held, wantOK, wantHeld)
	}
}

// release is sl.Release, failing the subtest on an error.
func (s *slotSuite) release(sl engine.Slots, key, holder string) {
	s.t.Helper()
	if err := sl.Release(s.ctx, key, holder); err != nil {
		s.t.Fatalf("Release(%q, %q): %v", key, holder, err)
	}
}

func slotsAdmitMax(s *slotSuite) {
	sl := s.slots()
	for i := 1; i <= 3; i++ {
		s.want(sl, "k", "h"+strconv.Itoa(i), 3, true, i)
	}
	s.want(sl, "k", "h4", 3, false, 3)
	s.want(sl, "k", "h5", 3, false, 3)
	// A holder that holds is admitted again, taking nothing more.
	s.want(sl, "k", "h2", 3, true, 3)
	s.want(sl, "k", "h4", 3, false, 3)
}

func slotsReleaseFrees(s *slotSuite) {
	sl := s.slots()
	s.want(sl, "k", "a", 2, true, 1)
	s.want(sl, "k", "b", 2, true, 2)
	s.release(sl, "k", "a")
	s.want(sl, "k", "c", 2, true, 2)
	s.want(sl, "k", "d", 2, false, 2)
	s.release(sl, "k", "b")
	s.release(sl, "k", "c")
	s.want(sl, "k", "d", 2, true, 1)
}

func slotsReleaseIdempotent(s *slotSuite) {
	sl := s.slots()
	s.want(sl, "k", "a", 2, true, 1)
	s.want(sl, "k", "b", 2, true, 2)
	s.release(sl, "k", "a")
	s.release(sl, "k", "a")
	s.release(sl, "k", "never")
	s.release(sl, "nokey", "never")
	// b still holds its slot; one is free.
	s.want(sl, "k", "c", 2, true, 2)
	s.want(sl, "k", "d", 2, false, 2)
}

func slotsIndependent(s *slotSuite) {
	st := s.store()
	name := s.name()
	sl := s.bind(st, name)
	s.want(sl, "a", "x", 1, true, 1)
	s.want(sl, "a", "y", 1, false, 1)
	s.want(sl, "b", "y", 1, true, 1)
	// The same key of another name.
	other := s.bind(st, s.name())
	s.want(other, "a", "y", 1, true, 1)
	// Keys that an escaping store could confuse.
	for _, k := range []string{"", "{a}", "a}", "%7Ba%7D", "a:b", "\xff"} {
		s.want(sl, k, "x", 1, true, 1)
	}
	// Another Bind of the name, on another instance's store, counts the
	// same slots.
	again := s.bind(s.store(), name)
	s.want(again, "a", "z", 1, false, 1)
	s.want(again, "a", "x", 1, true, 1)
}

func slotsExpire(s *slotSuite) {
	sl := s.slots()
	ttl := s.ttl(sl)
	start := time.Now()
	s.want(sl, "k", "dead", 1, true, 1)
	time.Sleep(ttl / 4)
	ok, held := s.acquire(sl, "k", "other", 1)
	if since := time.Since(start); since < ttl/2 {
		if ok || held != 1 {
			s.t.Errorf("Acquire %v after the slot was taken, TTL %v = %v, %d; want denied, 1", since, ttl, ok, held)
		}
	} else {
		s.t.Logf("the check before TTL/2 came %v after the acquire, too late to tell", since)
	}
	time.Sleep(time.Until(start.Add(2*ttl + time.Second)))
	s.want(sl, "k", "other", 1, true, 1)
}

func slotsRenew(s *slotSuite) {
	sl := s.slots()
	ttl := s.ttl(sl)
	holds := []engine.SlotHold{{Key: "a", Holder: "long"}, {Key: "b", Holder: "long"}, {Key: "c", Holder: "stream"}}
	for _, h := range holds {
		s.want(sl, h.Key, h.Holder, 1, true, 1)
	}
	// Renew every TTL/4 until 2×TTL and a second have passed; the slots
	// must then be held, unless the machine stalled a renewal past 3/4 of
	// the TTL, which the suite cannot tell from an expiry.
	last, start := time.Now(), time.Now()
	var gap time.Duration
	for time.Since(start) < 2*ttl+time.Second {
		time.Sleep(ttl / 4)
		if err := sl.Renew(s.ctx, holds); err != nil {
			s.t.Fatalf("Renew(%v): %v", holds, err)
		}
		gap, last = max(gap, time.Since(last)), time.Now()
	}
	if gap > ttl*3/4 {
		s.t.Skipf("a renewal came %v after the one before, TTL %v: too late to tell", gap, ttl)
	}
	for _, h := range holds {
		s.want(sl, h.Key, "late", 1, false, 1)
	}
	if err := sl.Renew(s.ctx, nil); err != nil {
		s.t.Errorf("Renew(nil): %v", err)
	}
}

func slotsRenewNoRetake(s *slotSuite) {
	sl := s.slots()
	s.want(sl, "k", "a", 1, true, 1)
	s.release(sl, "k", "a")
	holds := []engine.SlotHold{{Key: "k", Holder: "a"}, {Key: "never", Holder: "b"}}
	if err := sl.Renew(s.ctx, holds); err != nil {
		s.t.Fatalf("Renew(%v): %v", holds, err)
	}
	s.want(sl, "k", "c", 1, true, 1)
	s.want(sl, "never", "c", 1, true, 1)
}

// slotsConcurrent has goroutines on two instances acquire and release one
// key's slots, counting the holders in between: never above max.
func slotsConcurrent(s *slotSuite) {
	const (
		max     = 3
		workers = 8 // per instance
		rounds  = 15
	)
	name := s.name()
	sls := []engine.Slots{s.bind(s.store(), name), s.bind(s.store(), name)}
	var holding, peak, admitted, denied atomic.Int64
	errs := make(chan error, 2*workers)
	var wg sync.WaitGroup
	for i := range 2 * workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sl := sls[i%2]
			for r := range rounds {
				holder := fmt.Sprintf("w%d-r%d", i, r)
				ok, held, err := sl.Acquire(s.ctx, "k", holder, max)
				if err != nil {
					errs <- fmt.Errorf("Acquire(%q): %w", holder, err)
					return
				}
				if held > max {
					errs <- fmt.Errorf("Acquire(%q) = %v, %d held, above max %d", holder, ok, held, max)
					return
				}
				if !ok {
					denied.Add(1)
					continue
				}
				admitted.Add(1)
				n := holding.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Millisecond)
				holding.Add(-1)
				if err := sl.Release(s.ctx, "k", holder); err != nil {
					errs <- fmt.Errorf("Release(%q): %w", holder, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		s.t.Error(err)
	}
	if p := peak.Load(); p > max {
		s.t.Errorf("%d held at once, want at most %d", p, max)
	}
	if admitted.Load() < max {
		s.t.Errorf("%d admitted (%d denied), want at least %d", admitted.Load(), denied.Load(), max)
	}
	// Everything was released.
	s.want(sls[0], "k", "last", 1, true, 1)
}

// slotsSimultaneous has many holders on two instances acquire one key's
// slots at once, releasing none: exactly max are admitted.
func slotsSimultaneous(s *slotSuite) {
	const (
		max     = 5
		holders = 24
	)
	name := s.name()
	sls := []engine.Slots{s.bind(s.store(), name), s.bind(s.store(), name)}
	var admitted atomic.Int64
	start := make(chan struct{})
	errs := make(chan error, holders)
	var wg sync.WaitGroup
	for i := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, held, err := sls[i%2].Acquire(s.ctx, "k", "h"+strconv.Itoa(i), max)
			switch {
			case err != nil:
				errs <- err
			case held > max || held < 1:
				errs <- fmt.Errorf("Acquire = %v, %d held, want 1 to %d", ok, held, max)
			case ok:
				admitted.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		s.t.Error(err)
	}
	if n := admitted.Load(); n != max {
		s.t.Errorf("%d of %d simultaneous acquirers admitted, want exactly %d", n, holders, max)
	}
}

func slotsLoweredMax(s *slotSuite) {
	sl := s.slots()
	for _, h := range []string{"a", "b", "c"} {
		s.acquire(sl, "k", h, 3)
	}
	s.want(sl, "k", "d", 2, false, 3)
	s.want(sl, "k", "d", 1, false, 3)
	// Nobody was released: still full at 3.
	s.want(sl, "k", "d", 3, false, 3)
	s.release(sl, "k", "a")
	s.want(sl, "k", "d", 2, false, 2)
	s.release(sl, "k", "b")
	s.want(sl, "k", "d", 2, true, 2)
}

func slotsBadInput(s *slotSuite) {
	st := s.store()
	for _, name := range []string{"", "a b", "tab\t", "\xff"} {
		if sl, err := st.BindSlots(name); err == nil {
			sl.Close()
			s.t.Errorf("BindSlots(%q) succeeded, want an error", name)
		}
	}
	sl := s.bind(st, s.name())
	isBad := func(what string, err error) {
		s.t.Helper()
		if !errors.Is(err, engine.ErrInvalidSlot) {
			s.t.Errorf("%s: error %v, want one wrapping engine.ErrInvalidSlot", what, err)
		}
	}
	for _, max := range []int{0, -1, math.MinInt} {
		ok, _, err := sl.Acquire(s.ctx, "k", "h", max)
		if ok {
			s.t.Errorf("Acquire with max %d admitted", max)
		}
		isBad(fmt.Sprintf("Acquire with max %d", max), err)
	}
	long := string(make([]byte, engine.MaxHolderBytes+1))
	for _, holder := range []string{"", long} {
		ok, _, err := sl.Acquire(s.ctx, "k", holder, 1)
		if ok {
			s.t.Errorf("Acquire by holder of %d bytes admitted", len(holder))
		}
		isBad(fmt.Sprintf("Acquire by a holder of %d bytes", len(holder)), err)
		isBad(fmt.Sprintf("Release by a holder of %d bytes", len(holder)), sl.Release(s.ctx, "k", holder))
		isBad(fmt.Sprintf("Renew of a holder of %d bytes", len(holder)),
			sl.Renew(s.ctx, []engine.SlotHold{{Key: "k", Holder: "ok"}, {Key: "k", Holder: holder}}))
	}
	// Nothing was taken.
	s.want(sl, "k", "h", 1, true, 1)
}
