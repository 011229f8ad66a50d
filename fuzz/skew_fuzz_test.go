package fuzz

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// configFrom maps two fuzzer words onto the engine's whole domain: rates
// log-uniform from one token per 366 days to 1e9 tokens/s (every eighth
// rounded to a whole number, the common case), bursts log-uniform from 1 to
// 1e9 in steps of 0.001, the fill time capped at 366 days.
func configFrom(rateSel, burstSel uint64) (rate, burst float64) {
	const year = 366 * 86400
	lo, hi := math.Log(1.0/year), math.Log(1e9)
	rate = math.Exp(lo + float64(rateSel>>11)/(1<<53)*(hi-lo))
	if rateSel&7 == 0 {
		rate = max(1, math.Round(rate))
	}
	rate = min(max(rate, 1.0/year), 1e9)
	burst = math.Exp(float64(burstSel>>11) / (1 << 53) * math.Log(1e9))
	if burstSel&3 == 0 {
		burst = math.Round(burst)
	}
	burst = min(max(math.Round(burst*1000)/1000, 1), 1e9)
	if burst/rate > year {
		burst = max(1, math.Floor(rate*year*1000*(1-1e-12))/1000)
	}
	return rate, burst
}

// op is one decoded step: a clock move, a key, a cost, and whether the
// sweeping twin sweeps before it.
type op struct {
	dt    int64 // signed nanoseconds, applied with saturation
	key   int
	cost  float64
	sweep bool
}

// decode turns fuzzer bytes into steps, 4 bytes each; the high nibble 15 of
// the first byte marks a sweep. Clock moves cover the
// cases that broke other limiters: none, ±1 ns, ±1 µs, small and huge
// backward jumps, forward jumps just below, at and above the fill time, the
// largest forward jump, jumps around and far past the packed timestamp's
// span, and every power of two from 1 ns to 73 years.
func decode(script []byte, fill, horizon, tick int64, burst float64, keys int) []op {
	var ops []op
	for ; len(script) >= 4; script = script[4:] {
		kind, mag, k, c := script[0], int64(script[1]), int(script[2]), script[3]
		var dt int64
		switch kind % 16 {
		case 0:
			dt = 0
		case 1:
			dt = 1
		case 2:
			dt = -1
		case 3:
			dt = 1000 * (mag + 1)
		case 4:
			dt = -1000 * (mag + 1)
		case 5:
			dt = fill/256*mag + mag
		case 6:
			dt = -fill / 256 * mag
		case 7:
			dt = fill - tick + mag - 128 // around the fill time
		case 8:
			dt = math.MaxInt64
		case 9:
			dt = -(1 << 62)
		case 10:
			dt = horizon + (mag-128)*tick // around the horizon
		case 11:
			dt = horizon/2 + (mag-128)*tick
		case 12:
			dt = int64(binary.LittleEndian.Uint16([]byte{byte(mag), c})) * 997
		case 13:
			// 1 ns to 2^61 ns (73 years) forward, every power of two: the
			// stalls and clock jumps, short and long, that a process meets.
			dt = int64(1) << (mag % 62)
		case 14:
			dt = horizon * (1 + mag%16) // past the packed timestamp's span
		default:
			dt = (fill / int64(burst*4+1)) * (mag % 8) // about a token or two
		}
		var cost float64
		switch c % 8 {
		case 0:
			cost = 0
		case 1, 2:
			cost = 1
		case 3:
			cost = math.Round(burst*float64(mag)/255*1000) / 1000 // up to the burst
		case 4:
			cost = burst * float64(mag) / 127 // up to 2x the burst, not multiples of 0.001
		case 5:
			cost = float64(mag) / 1000
		case 6:
			cost = []float64{-1, math.NaN(), math.Inf(1), burst + 0.001, 0.0005, 1e-9}[int(mag)%6]
		default:
			cost = float64(mag%16) + 0.5
		}
		ops = append(ops, op{dt, k % keys, cost, kind>>4 == 15})
	}
	return ops
}

// addSat adds with saturation and keeps the virtual clock within ±(2^62-1) of
// its start, so that every difference of two of its times fits an int64.
func addSat(a, b int64) int64 {
	const lim = 1<<62 - 1
	s := a + b
	if (b > 0 && s < a) || s > lim {
		return lim
	}
	if (b < 0 && s > a) || s < -lim {
		return -lim
	}
	return s
}

// after returns ns+dt (dt >= 0) capped at the clamp bound, ns within it.
func after(ns, dt int64) int64 {
	if ns <= 0 {
		return min(ns+dt, timeBound)
	}
	return ns + min(dt, timeBound-ns)
}

// ceilNanos returns ceil(x * 1e9) for x in seconds.
func ceilNanos(x *big.Rat) int64 {
	n := new(big.Rat).Mul(x, big.NewRat(1e9, 1))
	q, r := new(big.Int).QuoRem(n.Num(), n.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// maxOps bounds the steps of one FuzzSkew input.
const maxOps = 256

// FuzzSkew drives an engine and the reference spec with the same hostile
// clock and cost stream (shadow protocol: the spec applies the engine's
// decisions and checks them), together with three twin engines that must
// decide exactly alike, and checks at every step:
//
//	P1  0 <= tokens <= burst, Remaining included, and Remaining is the
//	    bucket's count after the call
//	P2  the engine never holds more than the spec, and trails it by less
//	    than the documented slack (package fixedpoint), for every key, after
//	    any jump of the clock, however long a key was idle, now and at every
//	    later time
//	P3  per key, admitted tokens never exceed burst + rate * (latest clamped
//	    time - creation time), and no admission exceeds the spec's tokens
//	P4  a time before a bucket's last update counts as that update: a twin
//	    fed every time clamped to the key's last update decides alike
//	P6  refill is monotone in time up to the clamp, and any jump of at least
//	    the fill time refills to exactly full
//	P8/P9 a denial or a peek changes nothing: a twin that never sees them
//	    decides every other call alike
//	P10 cost 0 is always allowed and takes nothing; costs above the burst,
//	    negative, NaN or infinite are denied with RetryAfter = InfDuration
//	P11 RetryAfter is never shorter than the exact wait, longer by less than
//	    the slack's worth of refill plus two ticks, and is the first instant
//	    at which the bucket holds the cost; ResetAfter the first at which it
//	    is full
//	P12 eviction is lossless: a twin that sweeps, at times no later than any
//	    call still to come, decides alike
func FuzzSkew(f *testing.F) {
	f.Add(uint64(1<<63), uint64(1<<62), uint8(1), []byte{0, 0, 0, 1, 1, 0, 0, 1, 2, 0, 0, 1, 7, 128, 0, 1, 9, 0, 0, 1, 8, 0, 0, 1})
	f.Add(uint64(0), uint64(0), uint8(2), []byte{3, 5, 0, 3, 4, 200, 1, 4, 10, 128, 0, 1, 11, 0, 1, 2, 5, 255, 0, 6})
	f.Add(uint64(math.MaxUint64), uint64(math.MaxUint64), uint8(3), []byte{13, 1, 0, 1, 13, 2, 1, 1, 6, 40, 0, 1, 12, 9, 2, 200, 10, 0, 0, 3})
	f.Add(uint64(8), uint64(4), uint8(1), []byte{0, 0, 0, 1, 13, 1, 0, 1, 13, 1, 0, 1, 13, 1, 0, 1, 13, 1, 0, 1})
	f.Add(uint64(1<<60), uint64(3<<61), uint8(2), []byte{0, 0, 0, 3, 0xf5, 30, 1, 1, 13, 3, 0, 7, 0xf3, 9, 0, 0, 5, 200, 1, 4, 0xf0, 0, 1, 1})
	f.Fuzz(func(t *testing.T, rateSel, burstSel uint64, nkeys uint8, script []byte) {
		rate, burst := configFrom(rateSel, burstSel)
		cfg := engine.Config{Limit: engine.Limit(rate), Burst: burst, SweepInterval: -1}
		if burstSel&32 != 0 {
			cfg.Shards = 1 // every key in one shard: idle ones among busy ones
		}
		var engines [4]*engine.Engine
		for i := range engines {
			e, err := engine.New(cfg)
			if err != nil {
				t.Fatalf("New(rate=%v, burst=%v) in the documented domain: %v", rate, burst, err)
			}
			defer e.Close()
			engines[i] = e
		}
		// e is under test; skip never sees denials or peeks; swept sweeps;
		// clamped sees every time raised to the key's last update.
		e, skip, swept, clamped := engines[0], engines[1], engines[2], engines[3]

		s := newSpec(rate, burst)
		p := e.Precision()
		tick := int64(p.Tick)
		fillExact := new(big.Rat).Quo(s.burst, s.rate)
		fill := ceilNanos(fillExact)
		horizon := int64(min(p.Horizon, time.Duration(1<<62)))
		keys := int(nkeys%4) + 1
		// slack = 0.001 token + max(0.001 token, a tick's refill) +
		// 2*(tick-1 ns) of refill, and with ticks above 1 ns 0.001 token and
		// a tick's refill more, as documented.
		q := big.NewRat(1, 1000)
		tickRefill := new(big.Rat).Mul(s.rate, big.NewRat(tick, 1e9))
		slack := new(big.Rat).Add(q, new(big.Rat).Mul(s.rate, big.NewRat(2*(tick-1), 1e9)))
		if tickRefill.Cmp(q) > 0 {
			slack.Add(slack, tickRefill)
		} else {
			slack.Add(slack, q)
		}
		if tick > 1 {
			slack.Add(slack, q).Add(slack, tickRefill)
		}
		slackTime := new(big.Rat).Quo(slack, s.rate) // seconds of refill it amounts to
		fullAfter := fill + ceilNanos(slackTime) + 1 // refills any bucket to full

		// Longer streams add nothing a shorter one cannot reach, and slow
		// the fuzzer down by orders of magnitude.
		ops := decode(script[:min(len(script), 4*maxOps)], fill, horizon, tick, burst, keys)
		if len(ops) == 0 {
			return
		}
		base := time.Unix(0, 0)
		if rateSel&16 != 0 {
			base = time.Time{} // a virtual clock starting at year 1
		}
		// abs[i] is op i's time in ns since base; low[i] the earliest time of
		// ops i and later, at which the sweeping twin may sweep losslessly.
		abs := make([]int64, len(ops))
		low := make([]int64, len(ops))
		var now int64
		for i, o := range ops {
			now = addSat(now, o.dt)
			abs[i] = now
		}
		low[len(ops)-1] = abs[len(ops)-1]
		for i := len(ops) - 2; i >= 0; i-- {
			low[i] = min(abs[i], low[i+1])
		}
		first := abs[0]
		for _, x := range engines {
			x.TokensAt(base.Add(time.Duration(first)), "") // one epoch for all
		}
		timeAt := func(ns int64) time.Time { return base.Add(time.Duration(first + ns)) }

		// created and spent track P3 per key.
		created := map[string]int64{}
		spent := map[string]*big.Rat{}

		for i, o := range ops {
			ns := clampNS(abs[i] - first)
			key := fmt.Sprint("k", o.key)
			at := base.Add(time.Duration(abs[i]))
			if o.sweep {
				swept.SweepAt(timeAt(clampNS(low[i] - first)))
			}
			exact, m := s.level(key, ns)
			_, hasBucket := s.buckets[key]
			d := e.AllowAt(at, key, o.cost)
			where := func() string {
				return fmt.Sprintf("op %d (dt=%d key=%s cost=%v) rate=%v burst=%v at %d ns: %+v; exact tokens %v",
					i, o.dt, key, o.cost, rate, burst, ns, d, f64(exact))
			}
			if d.Remaining < 0 || d.Remaining > burst {
				t.Fatalf("P1: Remaining out of [0, burst]: %s", where())
			}

			// The twins.
			if got := swept.AllowAt(at, key, o.cost); got != d {
				t.Fatalf("P12: the sweeping twin decided %+v: %s", got, where())
			}
			c, ok := s.charge(o.cost)
			if ok && d.Allowed && c.Sign() > 0 {
				if got := skip.AllowAt(at, key, o.cost); got != d {
					t.Fatalf("P9: the twin that saw no denials or peeks decided %+v: %s", got, where())
				}
			}
			late := ns
			if hasBucket {
				late = max(ns, s.buckets[key].last)
			}
			got := clamped.AllowAt(timeAt(late), key, o.cost)
			shift := time.Duration(late - ns)
			// a, waited from ns, equals b, waited from late; waits that do not
			// fit a Duration saturate at InfDuration-1.
			sameWait := func(a, b time.Duration) bool {
				if a == engine.InfDuration || b == engine.InfDuration {
					return a == b
				}
				if b > engine.InfDuration-1-shift {
					return a == engine.InfDuration-1
				}
				return a == b+shift
			}
			retryOK := got.RetryAfter == 0 && d.RetryAfter == 0
			if !d.Allowed {
				retryOK = sameWait(d.RetryAfter, got.RetryAfter)
			}
			if got.Allowed != d.Allowed || got.Remaining != d.Remaining || !retryOK ||
				(d.Remaining < burst && !sameWait(d.ResetAfter, got.ResetAfter)) {
				t.Fatalf("P4: the twin called at the last update (%d ns) decided %+v: %s", late, got, where())
			}

			if !ok {
				if d.Allowed || d.RetryAfter != engine.InfDuration {
					t.Fatalf("P10: unsatisfiable cost not denied with InfDuration: %s", where())
				}
			} else {
				if c.Sign() == 0 && !d.Allowed {
					t.Fatalf("P10: a peek was denied: %s", where())
				}
				if d.Allowed && c.Sign() > 0 {
					if exact.Cmp(c) < 0 {
						t.Fatalf("P2/P3: admitted %v with only %v exact tokens: %s", f64(c), f64(exact), where())
					}
					s.spend(key, ns, c)
					exact = new(big.Rat).Sub(exact, c)
					if _, seen := created[key]; !seen {
						created[key], spent[key] = m, new(big.Rat)
					}
					spent[key].Add(spent[key], c)
					bound := new(big.Rat).Mul(s.rate, big.NewRat(m-created[key], 1e9))
					if bound.Add(bound, s.burst); spent[key].Cmp(bound) > 0 {
						t.Fatalf("P3: %v tokens admitted since creation, bound %v: %s", f64(spent[key]), f64(bound), where())
					}
				}
				if !d.Allowed {
					if exact.Cmp(new(big.Rat).Add(c, slack)) >= 0 {
						t.Fatalf("P2/P9: denied with %v exact tokens, at least cost + slack: %s", f64(exact), where())
					}
					// P11: the exact wait from the call's (clamped) time.
					wait := new(big.Rat).Quo(new(big.Rat).Sub(c, exact), s.rate)
					if wait.Sign() < 0 {
						wait.SetInt64(0)
					}
					wait.Add(wait, new(big.Rat).SetFrac(big.NewInt(m-ns), big.NewInt(1e9)))
					got := new(big.Rat).SetFrac(big.NewInt(int64(d.RetryAfter)), big.NewInt(1e9))
					saturated := d.RetryAfter == engine.InfDuration-1 && got.Cmp(wait) <= 0
					if d.RetryAfter <= 0 || (got.Cmp(wait) < 0 && !saturated) {
						t.Fatalf("P11: RetryAfter %v shorter than the exact wait %vs: %s", d.RetryAfter, f64(wait), where())
					}
					upper := new(big.Rat).Add(wait, slackTime)
					upper.Add(upper, new(big.Rat).SetFrac(big.NewInt(2*tick), big.NewInt(1e9)))
					if got.Cmp(upper) > 0 {
						t.Fatalf("P11: RetryAfter %v longer than exact %vs + slack: %s", d.RetryAfter, f64(wait), where())
					}
				}
			}

			// The engine's own count after the call: never above the exact
			// bucket, never behind it by the slack, whatever the clock did to
			// this key or to others.
			engineTokens := milli(e.TokensAt(at, key))
			if engineTokens.Cmp(milli(d.Remaining)) != 0 {
				t.Fatalf("P1: Remaining %v but the bucket holds %v after the call: %s", d.Remaining, f64(engineTokens), where())
			}
			gap := new(big.Rat).Sub(exact, engineTokens)
			if gap.Sign() < 0 {
				t.Fatalf("P2: engine holds %v, more than the exact %v: %s", f64(engineTokens), f64(exact), where())
			}
			if gap.Cmp(slack) >= 0 {
				t.Fatalf("P2: engine trails by %v, slack %v: %s", f64(gap), f64(slack), where())
			}
			if engineTokens.Sign() < 0 || engineTokens.Cmp(s.burst) > 0 {
				t.Fatalf("P1: engine tokens %v out of [0, burst]: %s", f64(engineTokens), where())
			}
			// P11: the waits name the first instants that have the tokens,
			// counted from the call's time as clamped to ±2^62 ns. With
			// ticks above 1 ns a call inside a tick in which the bucket
			// fills is decided as at a later boundary, so its waits may be
			// later than the first instant (never earlier).
			exactWaits := tick == 1
			from := timeAt(ns)
			if ok && c.Sign() > 0 && !d.Allowed && d.RetryAfter < engine.InfDuration-1 && ns+int64(d.RetryAfter) < timeBound {
				if got := milli(e.TokensAt(from.Add(d.RetryAfter), key)); got.Cmp(c) < 0 {
					t.Fatalf("P11: only %v tokens RetryAfter later: %s", f64(got), where())
				}
				if got := milli(e.TokensAt(from.Add(d.RetryAfter-1), key)); exactWaits && got.Cmp(c) >= 0 {
					t.Fatalf("P11: already %v tokens 1 ns before RetryAfter: %s", f64(got), where())
				}
			}
			if d.ResetAfter > 0 && d.ResetAfter < engine.InfDuration-1 && ns+int64(d.ResetAfter) < timeBound {
				if got := e.TokensAt(from.Add(d.ResetAfter), key); got != burst {
					t.Fatalf("P11: %v tokens ResetAfter later, want full: %s", got, where())
				}
				if got := e.TokensAt(from.Add(d.ResetAfter-1), key); exactWaits && got == burst {
					t.Fatalf("P11: full 1 ns before ResetAfter: %s", where())
				}
			}
			b, hasBucket := s.buckets[key]
			if !hasBucket {
				continue
			}
			// P4: a time before the last update reads the same as that update.
			if b.last > -timeBound+1 {
				before := milli(e.TokensAt(timeAt(b.last-1), key))
				atLast := milli(e.TokensAt(timeAt(b.last), key))
				if before.Cmp(atLast) != 0 {
					t.Fatalf("P4: tokens just before the last update %v differ from at it %v: %s", f64(before), f64(atLast), where())
				}
			}
			// P6: monotone up to the clamp, full a fill time later, and
			// exact at every later time: the spec's level there.
			prev := engineTokens
			steps := []int64{1, tick, fill / 3, fill - tick, fill, fullAfter, horizon / 2, horizon, 3 * horizon, math.MaxInt64}
			slices.Sort(steps)
			for _, dt := range steps {
				t2 := after(max(ns, b.last), dt)
				later := milli(e.TokensAt(timeAt(t2), key))
				if later.Cmp(prev) < 0 {
					t.Fatalf("P6: %v tokens %d ns later, fewer than %v: %s", f64(later), dt, f64(prev), where())
				}
				prev = later
				want, _ := s.level(key, t2)
				if g := new(big.Rat).Sub(want, later); g.Sign() < 0 || g.Cmp(slack) >= 0 {
					t.Fatalf("P2/P6: %v tokens %d ns later, exact %v: %s", f64(later), dt, f64(want), where())
				}
			}
			if full := max(ns, b.last) + fullAfter; full < timeBound {
				if got := e.TokensAt(timeAt(full), key); got != burst {
					t.Fatalf("P6: %v tokens a fill time later, want burst %v: %s", got, burst, where())
				}
			}
		}
	})
}
