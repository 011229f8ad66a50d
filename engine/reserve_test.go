package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// wantAct fails t unless r is OK with its tokens due at d.
func wantAct(t *testing.T, r *engine.Reservation, d time.Duration) {
	t.Helper()
	if !r.OK() || !r.TimeToAct().Equal(at(d)) {
		t.Errorf("reservation OK %v, due at %v; want OK, due at %v", r.OK(), r.TimeToAct().Sub(at(0)), d)
	}
}

// Reservations on one key are served in the order they were made, and a
// take made after them, even at an earlier time, finds their tokens gone.
func TestReserveQueuesInOrder(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 5})
	r := e.ReserveN(at(0), "k", 5)
	wantAct(t, r, 0)
	if d := r.DelayFrom(at(0)); d != 0 {
		t.Errorf("DelayFrom of tokens there already = %v, want 0", d)
	}
	wantAct(t, e.ReserveN(at(0), "k", 2), 200*time.Millisecond)
	r3 := e.ReserveN(at(0), "k", 1)
	wantAct(t, r3, 300*time.Millisecond)
	if d := r3.DelayFrom(at(100 * time.Millisecond)); d != 200*time.Millisecond {
		t.Errorf("DelayFrom(100ms) = %v, want 200ms", d)
	}
	if d := r3.DelayFrom(at(time.Second)); d != 0 {
		t.Errorf("DelayFrom after the tokens are due = %v, want 0", d)
	}
	// Promised until 300ms: a take at 250ms waits for refill after that.
	if d := e.AllowAt(at(250*time.Millisecond), "k", 1); d.Allowed || d.RetryAfter != 150*time.Millisecond {
		t.Errorf("take of 1 at 250ms = %+v, want denied, retry after 150ms", d)
	}
	if d := e.AllowAt(at(400*time.Millisecond), "k", 1); !d.Allowed || d.Remaining != 0 {
		t.Errorf("take of 1 at 400ms = %+v, want allowed, 0 left", d)
	}
	if s := e.Stats(); s.Allowed != 4 || s.Denied != 1 {
		t.Errorf("Stats = %+v, want 4 allowed (3 reservations, 1 take), 1 denied", s)
	}
}

func TestReserveNeverPayable(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 5})
	for _, n := range []float64{5.001, -1, math.NaN(), math.Inf(1)} {
		r := e.ReserveN(at(0), "k", n)
		if r.OK() || r.DelayFrom(at(0)) != engine.InfDuration {
			t.Errorf("ReserveN(%v): OK %v, delay %v; want not OK, InfDuration", n, r.OK(), r.DelayFrom(at(0)))
		}
		r.CancelAt(at(0)) // nothing to give back
	}
	if got := e.TokensAt(at(0), "k"); got != 5 {
		t.Errorf("after refused reservations: %v tokens, want 5 (nothing taken)", got)
	}
	if s := e.Stats(); s.Denied != 4 || s.Allowed != 0 {
		t.Errorf("Stats = %+v, want 4 denied", s)
	}
	var zero engine.Reservation
	if zero.OK() || zero.DelayFrom(at(0)) != engine.InfDuration || !zero.TimeToAct().IsZero() {
		t.Error("the zero Reservation is not a refused one")
	}
	zero.CancelAt(at(0))
}

func TestReserveCancel(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		name string
		// run drains k at 0 (rate 10/s, burst 5), reserves, cancels, and
		// returns the key's tokens at the times of want.
		run  func(e *engine.Engine)
		want map[time.Duration]float64
		// atMost: want holds upper bounds (what the key would hold had
		// the reservation never been made), not exact values.
		atMost bool
	}{
		{"alone: as if never made", func(e *engine.Engine) {
			e.ReserveN(at(0), "k", 2).CancelAt(at(100 * ms))
		}, map[time.Duration]float64{100 * ms: 1, 200 * ms: 2, 500 * ms: 5}, false},
		{"at the instant it was made: the tokens only come with the refill", func(e *engine.Engine) {
			e.ReserveN(at(0), "k", 5).CancelAt(at(0))
		}, map[time.Duration]float64{0: 0, 300 * ms: 3}, false},
		{"behind another: nothing given back, the other keeps its time", func(e *engine.Engine) {
			r := e.ReserveN(at(0), "k", 2)
			wantAct(t, e.ReserveN(at(0), "k", 2), 400*ms)
			r.CancelAt(at(100 * ms))
		}, map[time.Duration]float64{400 * ms: 0, 500 * ms: 1}, false},
		{"half covered by a later one: half given back", func(e *engine.Engine) {
			r := e.ReserveN(at(0), "k", 2)
			wantAct(t, e.ReserveN(at(0), "k", 1), 300*ms)
			r.CancelAt(at(100 * ms))
		}, map[time.Duration]float64{200 * ms: 0, 250 * ms: 0.5, 400 * ms: 2}, false},
		{"after its time: nothing", func(e *engine.Engine) {
			e.ReserveN(at(0), "k", 2).CancelAt(at(201 * ms))
		}, map[time.Duration]float64{201 * ms: 0.01, 400 * ms: 2}, false},
		{"twice: once", func(e *engine.Engine) {
			r := e.ReserveN(at(0), "k", 2)
			r.CancelAt(at(100 * ms))
			r.CancelAt(at(100 * ms))
		}, map[time.Duration]float64{100 * ms: 1, 200 * ms: 2}, false},
		{"across a change of rate: never more than had it not been made", func(e *engine.Engine) {
			r := e.ReserveN(at(0), "k", 2) // due at 200ms
			if err := e.SetLimitAt(at(50*ms), 20); err != nil {
				t.Fatal(err)
			}
			r.CancelAt(at(100 * ms))
		}, map[time.Duration]float64{100 * ms: 1.5, 200 * ms: 3.5}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, engine.Config{Limit: 10, Burst: 5})
			e.AllowAt(at(0), "k", 5)
			tt.run(e)
			var times []time.Duration
			for d := range tt.want {
				times = append(times, d)
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			for _, d := range times {
				got := e.TokensAt(at(d), "k")
				if tt.atMost && got > tt.want[d]+1e-9 || !tt.atMost && math.Abs(got-tt.want[d]) > 1e-9 {
					t.Errorf("TokensAt(%v) = %v, want %v (at most: %v)", d, got, tt.want[d], tt.atMost)
				}
			}
		})
	}
}

// The interval bound holds for takes and reservations together: in any
// interval, what was admitted (takes at their times, reservations at their
// TimeToAct, less the cancelled ones) is at most Burst + Limit × its length.
// Random streams of takes, reservations and cancellations on one key, on a
// clock of whole milliseconds at 10 tokens/s (a token per 100 ms, exact).
func TestReserveIntervalBound(t *testing.T) {
	const limit, burst = 10.0, 5.0
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 3))
		e := newEngine(t, engine.Config{Limit: limit, Burst: burst})
		type admit struct {
			at time.Duration
			n  float64
		}
		var admitted []admit
		type pending struct {
			r *engine.Reservation
			n float64
		}
		var open []pending
		now := time.Duration(0)
		for range 300 {
			now += time.Duration(rng.IntN(150)) * time.Millisecond
			n := float64(1 + rng.IntN(3))
			switch op := rng.IntN(10); {
			case op < 4:
				if e.AllowAt(at(now), "k", n).Allowed {
					admitted = append(admitted, admit{now, n})
				}
			case op < 8:
				if r := e.ReserveN(at(now), "k", n); r.OK() {
					open = append(open, pending{r, n})
				}
			case len(open) > 0:
				i := rng.IntN(len(open))
				p := open[i]
				p.r.CancelAt(at(now))
				if p.r.TimeToAct().Before(at(now)) {
					admitted = append(admitted, admit{p.r.TimeToAct().Sub(at(0)), p.n}) // too late to cancel
				}
				open = append(open[:i], open[i+1:]...)
			}
		}
		for _, p := range open {
			admitted = append(admitted, admit{p.r.TimeToAct().Sub(at(0)), p.n})
		}
		sort.Slice(admitted, func(i, j int) bool { return admitted[i].at < admitted[j].at })
		for i := range admitted {
			sum := 0.0
			for j := i; j < len(admitted); j++ {
				sum += admitted[j].n
				span := (admitted[j].at - admitted[i].at).Seconds()
				if sum > burst+limit*span+1e-9 {
					t.Fatalf("seed %d: %v tokens admitted in [%v, %v], above %v", seed, sum, admitted[i].at, admitted[j].at, burst+limit*span)
				}
			}
		}
	}
}

// A reservation that waited, cancelled after SetAt lowered the rate, gives
// nothing back: at 20/s its 2 tokens were due at 100 ms, at 10/s those
// 100 ms hold 1 token, and giving the 2 back (rewound by the 1 the new rate
// refills) left 1 token at 0 in a bucket drained at 0: an admission above
// Burst + Limit × elapsed. TestReserveRacingTakesConcurrent found it.
func TestReserveCancelAfterSetAtGivesNothingBack(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 20, Burst: 2})
	if !e.AllowAt(at(0), "k", 2).Allowed {
		t.Fatal("a full bucket of 2 refused 2")
	}
	r := e.ReserveN(at(0), "k", 2)
	wantAct(t, r, 100*time.Millisecond)
	if err := e.SetAt(at(0), 10, 2); err != nil {
		t.Fatal(err)
	}
	r.CancelAt(at(0))
	if d := e.AllowAt(at(0), "k", 1); d.Allowed {
		t.Errorf("a take of 1 at 0 in the bucket drained at 0 = %+v, want denied", d)
	}
	if got := e.TokensAt(at(0), "k"); got != 0 {
		t.Errorf("bucket holds %v at 0 after the cancel, want 0", got)
	}
}

// Takes, reservations, cancellations and sweeps racing on one key with a
// frozen clock: what is admitted by each instant T (takes at the frozen
// time, reservations not cancelled at their TimeToAct) is at most
// Burst + Limit × T.
func TestReserveRacingTakesConcurrent(t *testing.T) {
	t.Run("changes=off", func(t *testing.T) { reserveRacing(t, false) })
	t.Run("changes=on", func(t *testing.T) { reserveRacing(t, true) })
}

// reserveRacing is TestReserveRacingTakesConcurrent; with changes, one more
// goroutine flips the limit between 10/s, burst 5 and 20/s, burst 8 at the
// frozen time, and the bound is taken at the larger of each.
func reserveRacing(t *testing.T, changes bool) {
	limit, burst := 10.0, 5.0
	const goroutines, ops = 4, 300
	e := newEngine(t, engine.Config{Limit: engine.Limit(limit), Burst: burst})
	type admit struct {
		at time.Duration
		n  float64
	}
	type reserved struct {
		r *engine.Reservation
		n float64
	}
	var mu sync.Mutex
	var admitted []admit
	var wg, sweeper sync.WaitGroup
	var stop atomic.Bool
	sweeper.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if changes && i%2 == 0 {
				if err := e.SetAt(at(0), engine.Limit(10+10*(i/2%2)), float64(5+3*(i/2%2))); err != nil {
					t.Error(err)
				}
			} else {
				e.SweepAt(at(0))
			}
			runtime.Gosched()
		}
	})
	if changes {
		limit, burst = 20, 8
	}
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 11))
			var mine []admit
			var open []reserved
			for range ops {
				n := float64(1 + rng.IntN(3))
				switch rng.IntN(3) {
				case 0:
					if e.AllowAt(at(0), "k", n).Allowed {
						mine = append(mine, admit{0, n})
					}
				case 1:
					if r := e.ReserveN(at(0), "k", n); r.OK() {
						open = append(open, reserved{r, n})
					}
				default:
					if len(open) > 0 {
						open[len(open)-1].r.CancelAt(at(0))
						open = open[:len(open)-1]
					}
				}
			}
			for _, o := range open {
				mine = append(mine, admit{o.r.TimeToAct().Sub(at(0)), o.n})
			}
			mu.Lock()
			admitted = append(admitted, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	stop.Store(true)
	sweeper.Wait()
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].at < admitted[j].at })
	sum := 0.0
	for _, a := range admitted {
		sum += a.n
		if bound := burst + limit*a.at.Seconds(); sum > bound+1e-9 {
			t.Fatalf("%v tokens admitted by %v, above %v", sum, a.at, bound)
		}
	}
	if len(admitted) == 0 {
		t.Fatal("nothing admitted")
	}
}

// What a reservation leaves at its tick, less than a tick's refill, is not
// there for a take before it: 1e7 tokens/s, ticks of 1 ns, 0.995 token due
// at 100 ns, where the bucket holds 1.
func TestReserveLeavesNothingBeforeItsTime(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1e7, Burst: 1})
	e.AllowAt(at(0), "k", 1)
	wantAct(t, e.ReserveN(at(0), "k", 0.995), 100*time.Nanosecond)
	if d := e.AllowAt(at(0), "k", 0.001); d.Allowed {
		t.Errorf("take of 0.001 at 0 behind a reservation due at 100ns = %+v, want denied", d)
	}
	if got := e.TokensAt(at(0), "k"); got != 0 {
		t.Errorf("TokensAt(0) = %v, want 0", got)
	}
}

// Reservations queued past the engine's range of time (146 years) are
// refused; the ones before it keep their order and the bucket its state.
func TestReserveBacklogEndsAtTheRange(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: engine.Every(366 * 24 * time.Hour), Burst: 1})
	last := at(0)
	refused := 0
	for range 300 {
		r := e.ReserveN(at(0), "k", 1)
		if !r.OK() {
			refused++
			continue
		}
		if refused > 0 || r.TimeToAct().Before(last) {
			t.Fatalf("reservation due at %v after %d refused, last due at %v", r.TimeToAct(), refused, last)
		}
		last = r.TimeToAct()
	}
	if limit := at(146 * 365 * 24 * time.Hour); refused == 0 || last.After(limit) {
		t.Errorf("%d refused, last due %v after the start; want some refused, none past 146 years", refused, last.Sub(at(0)))
	}
	if d := e.AllowAt(at(0), "k", 1); d.Allowed {
		t.Errorf("take at 0 behind the backlog = %+v, want denied", d)
	}
}

// Reservations on the overflow bucket (FullShare) wait and give back as on
// a key's own bucket.
func TestReserveOnTheOverflowBucket(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 5, MaxKeys: 1})
	e.AllowAt(at(0), "a", 5) // the one bucket, not full until 500ms
	wantAct(t, e.ReserveN(at(0), "b", 5), 0)
	r := e.ReserveN(at(0), "c", 2)
	wantAct(t, r, 200*time.Millisecond)
	r.CancelAt(at(100 * time.Millisecond))
	if d := e.AllowAt(at(100*time.Millisecond), "d", 1); !d.Allowed || d.Remaining != 0 {
		t.Errorf("take of 1 from the overflow bucket after the cancel = %+v, want allowed, 0 left", d)
	}
}

// Reservations and cancellations on buckets that a sweep far ahead evicts
// meanwhile, with due times past half the packed timestamp's span (their
// buckets are replaced): nothing panics, and every reservation is due at
// once (a key evicted ahead is decided at the eviction) or when its bucket
// refills.
func TestReserveRacingEvictionsOfReplacedBuckets(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 0.01, Burst: 1000, Shards: 1})
	keys := 20000
	if testing.Short() {
		keys = 5000 // still far more than the sweeps that race them
	}
	for i := range keys {
		e.AllowAt(at(0), fmt.Sprint(i), 1000)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			e.SweepAt(at(time.Duration(200000+i) * time.Second))
		}
	})
	refill := at(100000 * time.Second)
	for i := range keys {
		r := e.ReserveN(at(0), fmt.Sprint(i), 1000)
		if !r.OK() || !r.TimeToAct().Equal(at(0)) && !r.TimeToAct().Equal(refill) {
			t.Errorf("key %d: OK %v, due at %v; want due at 0 or at the refill", i, r.OK(), r.TimeToAct().Sub(at(0)))
		}
		r.CancelAt(at(0))
	}
	wg.Wait()
}

// A flood of new keys through reservations is bounded as takes are: never
// more than MaxKeys buckets, and the keys without room share the overflow
// bucket: ten keys with buckets get their token at once, the other 990
// share the overflow bucket's 5 and then its refill.
func TestReserveFloodOfKeysKeepsMaxKeys(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1, Burst: 5, MaxKeys: 10})
	now := 0
	for i := range 1000 {
		if r := e.ReserveN(at(0), fmt.Sprint("flood-", i), 1); r.OK() && r.TimeToAct().Equal(at(0)) {
			now++
		}
	}
	if n := e.Len(); n > 10 {
		t.Errorf("%d live buckets after a flood of 1,000 keys, want at most MaxKeys = 10", n)
	}
	if now != 10+5 {
		t.Errorf("%d reservations due at once, want 15 (one for each of 10 buckets, and the overflow bucket's 5)", now)
	}
}
