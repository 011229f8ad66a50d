package engine_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Every way of admitting tokens at once, on one goroutine and a virtual
// clock: takes, reservations (kept, cancelled before they are due, or
// cancelled too late), TakeAll with a second key that sometimes denies and
// makes the first take be given back, sweeps, and changes of limit between
// 10/s, burst 5 and 20/s, burst 8, all at the clock's time. Whatever the
// order, no window of time admits more than the largest burst in force in
// it plus the refill of the rates in force: a give-back (a cancel, or
// TakeAll's undo) that returned more than the bucket would hold without
// the take shows as a window above the bound. A reservation counts at its
// TimeToAct, a take at its time. Without the rule that a waiting
// reservation cancelled after a change gives nothing back, 45 of the 400
// seeds fail.
func TestAdmissionBoundAcrossEveryPath(t *testing.T) {
	for seed := range uint64(400) {
		e, err := engine.New(engine.Config{Limit: 10, Burst: 5, Shards: 1, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 29))
		type admit struct {
			// from is when a reservation was made (at for a take): its
			// wait was priced at the limit in force then.
			from, at time.Duration
			n, rate  float64 // rate: the limit's when from
		}
		type open struct {
			r       *engine.Reservation
			from    time.Duration
			n, rate float64
		}
		var (
			clock    time.Duration
			admitted []admit
			opens    []open
			trail    []string
			out      [2]engine.Decision
			limits   = limitSchedule{{0, 10, 5}}
		)
		say := func(format string, args ...any) {
			trail = append(trail, fmt.Sprintf("%v: ", clock)+fmt.Sprintf(format, args...))
		}
		for i, changes := 0, 0; i < 600; i++ {
			switch rng.IntN(5) {
			case 0, 1: // several calls at one instant
			case 2:
				clock += time.Duration(rng.IntN(1000)) * time.Millisecond
			default:
				clock += time.Duration(rng.IntN(30)) * time.Millisecond
			}
			n := float64(1+rng.IntN(40)) / 8
			switch op := rng.IntN(16); {
			case op < 3:
				d := e.AllowAt(at(clock), "k", n)
				say("AllowAt(k, %v) = %v", n, d.Allowed)
				if d.Allowed {
					admitted = append(admitted, admit{clock, clock, n, 0})
				}
			case op < 6:
				r := e.ReserveN(at(clock), "k", n)
				say("ReserveN(k, %v) ok=%v due %v", n, r.OK(), r.TimeToAct().Sub(t0))
				if r.OK() {
					opens = append(opens, open{r, clock, n, limits[len(limits)-1].rate})
				}
			case op < 9:
				if len(opens) == 0 {
					continue
				}
				j := len(opens) - 1 // the latest, most likely still waiting
				if rng.IntN(2) == 0 {
					j = rng.IntN(len(opens))
				}
				o := opens[j]
				opens = slices.Delete(opens, j, j+1)
				o.r.CancelAt(at(clock))
				due := o.r.TimeToAct().Sub(t0)
				say("Cancel(%v due %v)", o.n, due)
				if clock > due {
					// Too late to give back: the holder may have acted.
					admitted = append(admitted, admit{o.from, due, o.n, o.rate})
				}
			case op < 12:
				// j is drained now and then, so that the take of k is
				// given back.
				m := float64(1 + rng.IntN(8))
				k, err := e.TakeAllAt(at(clock), []engine.Take{{Limiter: e, Key: "k", N: n}, {Limiter: e, Key: "j", N: m}}, out[:])
				if err != nil {
					t.Fatal(err)
				}
				say("TakeAll(k %v, j %v) = %d", n, m, k)
				if k == -1 {
					admitted = append(admitted, admit{clock, clock, n, 0})
				}
			case op < 14:
				lim, burst := 10.0, 5.0
				if changes++; changes%2 == 1 {
					lim, burst = 20, 8
				}
				if err := e.SetAt(at(clock), engine.Limit(lim), burst); err != nil {
					t.Fatal(err)
				}
				limits = append(limits, limitFrom{clock, lim, burst})
				say("SetAt(%v/s, %v)", lim, burst)
			default:
				e.SweepAt(at(clock))
				say("SweepAt")
			}
		}
		for _, o := range opens {
			admitted = append(admitted, admit{o.from, o.r.TimeToAct().Sub(t0), o.n, o.rate})
		}
		slices.SortStableFunc(admitted, func(a, b admit) int { return cmp.Compare(a.at, b.at) })
		sum, sums := 0.0, map[float64][]float64{}
		for j := range admitted {
			sum += admitted[j].n
			t1 := admitted[j].at
			// The window [admitted[i].at, t1] grows back one admission
			// at a time; burst is the largest burst in force in it (k
			// walks back over the limits), priced and floor as
			// limitSchedule.refill says.
			k := limits.in(t1)
			win, burst, priced, floor := 0.0, limits[k].burst, t1, 0.0
			for i := j; i >= 0; i-- {
				a := admitted[i]
				win += a.n
				if a.from < a.at {
					priced = min(priced, a.from)
					floor = max(floor, a.rate)
				}
				// A change at the window's first instant may have come
				// after calls at that instant: the limit before it counts.
				for k > 0 && limits[k].from >= min(priced, a.at) {
					k--
					burst = max(burst, limits[k].burst)
				}
				if bound := burst + limits.refill(a.at, t1, floor, sums); win > bound+1e-6 {
					t.Fatalf("seed %d: %v tokens admitted from %v to %v, above %v; calls:\n%s",
						seed, win, a.at, t1, bound, strings.Join(trail, "\n"))
				}
			}
		}
		if sum == 0 {
			t.Fatalf("seed %d: nothing admitted", seed)
		}
		e.Close()
	}
}

// limitSchedule is the limits an engine had, each from its time on, in
// order of time.
type limitSchedule []limitFrom

type limitFrom struct {
	from        time.Duration
	rate, burst float64
}

// in is the index of the limit in force at t, after any change at t.
func (ls limitSchedule) in(t time.Duration) int {
	i, _ := slices.BinarySearchFunc(ls, t, func(l limitFrom, t time.Duration) int {
		return cmp.Compare(l.from, t+1)
	})
	return i - 1
}

// refill is the most a bucket refills from s to t at each instant's rate,
// but at least floor. A reservation that had to wait was priced at the
// limit of its time, and keeps its TimeToAct across a change: floor is the
// fastest rate any reservation due in the window was priced at.
func (ls limitSchedule) refill(s, t time.Duration, floor float64, sums map[float64][]float64) float64 {
	upTo, ok := sums[floor]
	if !ok {
		// upTo[i]: the refill from 0 to ls[i].from.
		upTo = make([]float64, len(ls))
		for i := 1; i < len(ls); i++ {
			upTo[i] = upTo[i-1] + max(ls[i-1].rate, floor)*(ls[i].from-ls[i-1].from).Seconds()
		}
		sums[floor] = upTo
	}
	at := func(x time.Duration) float64 {
		i := ls.in(x)
		return upTo[i] + max(ls[i].rate, floor)*(x-ls[i].from).Seconds()
	}
	return at(t) - at(s)
}
