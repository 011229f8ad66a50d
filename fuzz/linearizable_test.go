package fuzz

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/shard"
)

// The histories below run at 1000 tokens/s on a clock counted in whole
// microseconds: one quantum (0.001 token) per microsecond, so the engine's
// fixed-point bucket and the integer bucket of linModel agree exactly, and a
// history is linearizable or not with no rounding slack to argue about. The
// limits SetAt changes to keep that: 1, 2 or 4 quanta per microsecond.
const (
	linRate  = 1000.0
	linBurst = 5.0
	linCap   = int64(linBurst * 1000) // quanta
	// linMaxCap is the largest burst of linLimits, in quanta.
	linMaxCap = 8000
)

// linLimits are the limits a history with changes moves through, in quanta
// per microsecond and quanta: other rates, and bursts below, above and at
// the first.
var linLimits = []struct{ rate, cap int64 }{{2, 3000}, {1, 8000}, {4, 5000}, {1, 2000}, {2, 8000}}

// linInput is one operation on one key: a take of cost quanta at t (µs since
// the epoch); for sweep, that key's part of a SweepAt(t); for set, its part
// of a SetAt(t) to rate quanta per µs and cap quanta.
type linInput struct {
	key       string
	t         int64
	cost      int64
	sweep     bool
	set       bool
	rate, cap int64
}

// linOutput is what a take returned, in quanta and nanoseconds.
type linOutput struct {
	allowed          bool
	remaining        int64
	retry, resetWait int64
}

// linState is one key's bucket: quanta at last (µs), refilling at rate
// quanta per µs up to cap. A key without a bucket (live false) holds what a
// bucket full from the start would, carried through every change; last is
// then the time of its eviction or of the latest change, before which no new
// bucket of the key starts (MinInt64 if neither happened).
type linState struct {
	quanta, last int64
	live         bool
	rate, cap    int64
}

func (s linState) level(t int64) (quanta, at int64) {
	if t <= s.last {
		return s.quanta, s.last
	}
	if s.quanta == s.cap || t-s.last >= s.cap {
		return s.cap, t
	}
	return min(s.cap, s.quanta+s.rate*(t-s.last)), t
}

// linStep is the sequential specification of one key, written from the
// engine's documentation: a time before the last update counts as that
// update; a take admits iff the bucket holds the cost, and only then changes
// it; a peek (cost 0) changes nothing; RetryAfter and ResetAfter are the
// exact waits from the caller's time (ResetAfter 0 when full); a sweep at t
// evicts the bucket iff it is full at t and t is not before its last update,
// and a new bucket starts no earlier than the eviction; a change at t keeps
// the bucket's level at t (or at its last update, if later), capped at the
// new burst, and refills at the new rate from then.
func linStep(s linState, in linInput) (linState, linOutput) {
	level, at := s.level(in.t)
	switch {
	case in.set:
		return linState{min(level, in.cap), at, s.live, in.rate, in.cap}, linOutput{}
	case in.sweep:
		if s.live && in.t >= s.last && level == s.cap {
			return linState{s.cap, in.t, false, s.rate, s.cap}, linOutput{}
		}
		return s, linOutput{}
	}
	out := linOutput{remaining: level}
	switch {
	case in.cost == 0:
		out.allowed = true
	case in.cost > s.cap:
		out.retry = int64(engine.InfDuration) // a change lowered the burst below the cost
	case level >= in.cost:
		out.allowed = true
		out.remaining = level - in.cost
		s = linState{out.remaining, at, true, s.rate, s.cap}
	default:
		out.retry = 1000*(at-in.t) + 1000*(in.cost-level)/s.rate
	}
	if out.remaining < s.cap {
		out.resetWait = 1000*(at-in.t) + 1000*(s.cap-out.remaining)/s.rate
	}
	return s, out
}

var linModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(linInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() any { return linState{linCap, math.MinInt64, false, 1, linCap} },
	Step: func(state, input, output any) (bool, any) {
		in := input.(linInput)
		next, want := linStep(state.(linState), in)
		return in.sweep || in.set || want == output.(linOutput), next
	},
	Hash: func(state any) uint64 {
		s := state.(linState)
		h := uint64(s.quanta)*0x9e3779b97f4a7c15 ^ uint64(s.last) ^ uint64(s.cap)<<40 ^ uint64(s.rate)<<60
		if s.live {
			h = ^h
		}
		return h
	},
	DescribeOperation: func(input, output any) string {
		in := input.(linInput)
		if in.sweep {
			return fmt.Sprintf("sweep(%s, t=%dµs)", in.key, in.t)
		}
		if in.set {
			return fmt.Sprintf("set(%s, t=%dµs, rate=%d/µs, burst=%d)", in.key, in.t, in.rate, in.cap)
		}
		o := output.(linOutput)
		return fmt.Sprintf("take(%s, t=%dµs, cost=%d) -> %v rem=%d retry=%dns reset=%dns", in.key, in.t, in.cost, o.allowed, o.remaining, o.retry, o.resetWait)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		return fmt.Sprintf("%d of %d quanta at %dµs, %d/µs (live %v)", s.quanta, s.cap, s.last, s.rate, s.live)
	},
}

// linKeys returns n keys that fall in n different shards of a table of the
// given size. A sweep that evicts a bucket raises its shard's watermark, the
// tick before which no new bucket of that shard starts (so that a caller
// older than an eviction sees the key as full at the eviction's time); with
// one key per shard that effect stays within the key's own history, which is
// what a per-key specification can describe.
func linKeys(n, shards int) []string {
	tab := shard.NewTable(shards, 0)
	taken := map[int]bool{}
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprint("key-", i)
		if s := tab.ShardOf(shard.Hash(k)); !taken[s] {
			taken[s] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// linHistory runs clients goroutines of ops takes each on keys (and, with
// sweeps, one goroutine calling SweepAt in a loop) and records the history.
// Each take reads the shared virtual clock and then, sometimes after
// yielding, calls AllowAt: so calls arrive with times out of order, as from
// goroutines that read time.Now before a slow path. frozen pins the clock.
// With changes, one more goroutine calls SetAt in a loop, through linLimits.
// Sweeps and changes take turns (a sweep at a time later than a change that
// follows it is documented to let the keys it evicted refill from the
// change's time), and a change's time is never before a sweep's; takes race
// both. It reports whether a sweep evicted anything and whether the limit
// ended other than it began: whether the history exercised them.
func linHistory(t *testing.T, clients, ops int, frozen, sweeps, changes bool) (_ []porcupine.Operation, evicted, changed bool) {
	const shards = 64
	e, err := engine.New(engine.Config{Limit: linRate, Burst: linBurst, Shards: shards, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	base := time.Unix(1_700_000_000, 0)
	e.TokensAt(base, "") // sets the epoch: times are µs since base
	keys := linKeys(8, shards)

	var clock atomic.Int64 // µs since base
	var seq atomic.Int64   // real-time order of calls and returns
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(ops []porcupine.Operation) {
		mu.Lock()
		history = append(history, ops...)
		mu.Unlock()
	}
	var done atomic.Bool
	var wg, takers sync.WaitGroup
	var admin sync.Mutex // sweeps and changes take turns
	var latestSweep int64
	if changes {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(clients), 7))
			var last int64
			for i := 0; !done.Load(); {
				if seq.Load() < last+300 {
					runtime.Gosched() // about one change per 150 takes
					continue
				}
				last = seq.Load()
				admin.Lock()
				// Sometimes behind some buckets' last updates.
				at := max(0, latestSweep, clock.Load()-int64(rng.IntN(50)))
				lim := linLimits[i%len(linLimits)]
				i++
				call := seq.Add(1)
				if err := e.SetAt(base.Add(time.Duration(at)*time.Microsecond), engine.Limit(lim.rate*1000), float64(lim.cap)/1000); err != nil {
					t.Error(err)
				}
				ret := seq.Add(1)
				admin.Unlock()
				part := make([]porcupine.Operation, len(keys))
				for j, k := range keys {
					part[j] = porcupine.Operation{ClientId: clients + 1, Input: linInput{key: k, t: at, set: true, rate: lim.rate, cap: lim.cap}, Call: call, Return: ret}
				}
				record(part)
				runtime.Gosched()
			}
		})
	}
	if sweeps {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(clients), 99))
			var last int64
			for !done.Load() {
				if seq.Load() < last+100 {
					runtime.Gosched() // about one sweep per 50 takes
					continue
				}
				last = seq.Load()
				admin.Lock()
				// Sometimes behind the callers' times, sometimes ahead.
				at := max(0, clock.Load()+int64(rng.IntN(200))-100)
				latestSweep = max(latestSweep, at)
				call := seq.Add(1)
				e.SweepAt(base.Add(time.Duration(at) * time.Microsecond))
				ret := seq.Add(1)
				admin.Unlock()
				part := make([]porcupine.Operation, len(keys))
				for i, k := range keys {
					part[i] = porcupine.Operation{ClientId: clients, Input: linInput{key: k, t: at, sweep: true}, Call: call, Return: ret}
				}
				record(part)
				runtime.Gosched()
			}
		})
	}
	for c := range clients {
		takers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(ops)))
			mine := make([]porcupine.Operation, 0, ops)
			for range ops {
				var now int64
				switch {
				case frozen:
				case rng.IntN(300) == 0:
					now = clock.Add(linMaxCap + 1000) // everyone idle: buckets refill, sweeps evict
				default:
					now = clock.Add(int64(rng.IntN(40)))
				}
				if rng.IntN(4) == 0 {
					runtime.Gosched() // others move the clock on before this call lands
				}
				in := linInput{key: keys[rng.IntN(len(keys))], t: now}
				switch rng.IntN(8) {
				case 0:
					in.cost = 0
				case 1:
					in.cost = int64(rng.IntN(int(linCap))) + 1
				case 2:
					in.cost = int64(rng.IntN(1000)) + 1
				default:
					in.cost = 1000 * int64(1+rng.IntN(2))
				}
				call := seq.Add(1)
				d := e.AllowAt(base.Add(time.Duration(now)*time.Microsecond), in.key, float64(in.cost)/1000)
				ret := seq.Add(1)
				out := linOutput{d.Allowed, int64(math.Round(d.Remaining * 1000)), int64(d.RetryAfter), int64(d.ResetAfter)}
				mine = append(mine, porcupine.Operation{ClientId: c, Input: in, Output: out, Call: call, Return: ret})
			}
			record(mine)
		})
	}
	takers.Wait()
	done.Store(true)
	wg.Wait()
	return history, e.Stats().Evicted > 0, e.Limit() != linRate || e.Burst() != linBurst
}

// checkLinearizable fails t unless every key's history is linearizable with
// respect to linStep. On failure it writes porcupine's visualisation to a
// temporary file and names it.
func checkLinearizable(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(linModel, history, time.Minute)
	if res == porcupine.Ok {
		return
	}
	if res == porcupine.Illegal {
		logIllegal(t, history, info)
	}
	if f, err := os.CreateTemp("", "faucet-linearizability-*.html"); err == nil {
		if porcupine.Visualize(linModel, info, f) == nil {
			t.Logf("visualisation: %s", f.Name())
		}
		f.Close()
	}
	t.Fatalf("history of %d operations: %v, want linearizable", len(history), res)
}

// logIllegal logs, for each key whose history is not linearizable, where the
// longest order the checker found stops: its last operations with the state
// after each, and the first operations (by call) it could not place. A
// failure on a machine where the visualisation is out of reach is then
// still diagnosable from the log.
func logIllegal(t *testing.T, history []porcupine.Operation, info porcupine.LinearizationInfo) {
	t.Helper()
	type id struct {
		client int
		call   int64
	}
	describe := func(op porcupine.Operation) string {
		return fmt.Sprintf("[%d,%d] client %d %s", op.Call, op.Return, op.ClientId, linModel.DescribeOperation(op.Input, op.Output))
	}
	partials := info.PartialLinearizationsOperations()
	for i, part := range linModel.Partition(history) { // the checker's partitions, in its order
		var longest []porcupine.Operation
		for _, ops := range partials[i] {
			if len(ops) > len(longest) {
				longest = ops
			}
		}
		key := part[0].Input.(linInput).key
		placed := map[id]bool{}
		for _, op := range longest {
			placed[id{op.ClientId, op.Call}] = true
		}
		var rest []porcupine.Operation
		for _, op := range part {
			if !placed[id{op.ClientId, op.Call}] {
				rest = append(rest, op)
			}
		}
		if len(rest) == 0 {
			continue
		}
		slices.SortFunc(rest, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		t.Logf("%s: %d of %d operations placed; the last of them, with the state after each:", key, len(longest), len(longest)+len(rest))
		state := linModel.Init()
		for i, op := range longest {
			_, state = linModel.Step(state, op.Input, op.Output)
			if i >= len(longest)-8 {
				t.Logf("  %s => %s", describe(op), linModel.DescribeState(state))
			}
		}
		t.Logf("%s: the first operations not placed:", key)
		for _, op := range rest[:min(8, len(rest))] {
			t.Logf("  %s", describe(op))
		}
	}
}

// P14: per-key histories of concurrent AllowAt (out-of-order times, mixed
// and fractional costs, peeks), SweepAt and SetAt are linearizable with
// respect to the sequential specification: every call's outcome, Remaining,
// RetryAfter and ResetAfter included, is that of some order of the calls
// consistent with real time.
func TestLinearizable(t *testing.T) {
	for _, tt := range []struct {
		name                    string
		frozen, sweeps, changes bool
	}{
		{"clock=moving/sweeps=off/changes=off", false, false, false},
		{"clock=moving/sweeps=on/changes=off", false, true, false},
		{"clock=frozen/sweeps=off/changes=off", true, false, false},
		{"clock=moving/sweeps=off/changes=on", false, false, true},
		{"clock=moving/sweeps=on/changes=on", false, true, true},
		{"clock=frozen/sweeps=off/changes=on", true, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Whether a sweep lands while a key is full, or a change
			// leaves the limit other than it began, depends on the
			// scheduler: a history that missed it is checked and another
			// run, up to a few.
			var evicted, changed bool
			for range 5 {
				history, ev, ch := linHistory(t, 4, 2500, tt.frozen, tt.sweeps, tt.changes)
				checkLinearizable(t, history)
				evicted, changed = evicted || ev, changed || ch
				if evicted == tt.sweeps && changed == tt.changes {
					break
				}
			}
			if tt.sweeps && !evicted {
				t.Error("no sweep evicted anything in 5 histories: eviction is not exercised")
			}
			if tt.changes && !changed {
				t.Error("no change of limit in 5 histories: SetAt is not exercised")
			}
		})
	}
}

// The checker is not vacuous: histories that no order of the calls explains
// are rejected.
func TestLinearizableRejects(t *testing.T) {
	take := func(client int, call, ret, at, cost int64, allowed bool, remaining int64) porcupine.Operation {
		in := linInput{key: "k", t: at, cost: cost}
		_, out := linStep(linState{remaining + cost, at, true, 1, linCap}, in) // the waits of the claimed outcome
		out.allowed, out.remaining = allowed, remaining
		if allowed {
			out.retry = 0
		}
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	for _, tt := range []struct {
		name    string
		history []porcupine.Operation
	}{
		// A lost update: two overlapping takes both see the full bucket.
		{"double spend", []porcupine.Operation{
			take(0, 1, 4, 0, linCap, true, 0),
			take(1, 2, 3, 0, linCap, true, 0),
		}},
		// An earlier time must not be credited again after a later one.
		{"backward time mints", []porcupine.Operation{
			take(0, 1, 2, 100, linCap, true, 0),
			take(0, 3, 4, 50, 1, true, 49),
		}},
		// An eviction of a bucket that was not full.
		{"lossy eviction", []porcupine.Operation{
			take(0, 1, 2, 0, 3000, true, 2000),
			{ClientId: 1, Input: linInput{key: "k", t: 10, sweep: true}, Call: 3, Return: 4},
			take(0, 5, 6, 10, linCap, true, 0),
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if porcupine.CheckOperations(linModel, tt.history) {
				t.Error("a non-linearizable history was accepted")
			}
		})
	}
}
