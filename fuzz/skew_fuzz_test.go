package fuzz

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// configFrom maps two fuzzer words onto the engine's whole domain: rates
// log-uniform from 1/86400 to 1e9 tokens/s (every eighth rounded to a whole
// number, the common case), bursts log-uniform from 1 to 1e9 in steps of
// 0.001, the fill time capped at 366 days.
func configFrom(rateSel, burstSel uint64) (rate, burst float64) {
	lo, hi := math.Log(1.0/86400), math.Log(1e9)
	rate = math.Exp(lo + float64(rateSel>>11)/(1<<53)*(hi-lo))
	if rateSel&7 == 0 {
		rate = max(1, math.Round(rate))
	}
	rate = min(max(rate, 1.0/86400), 1e9)
	burst = math.Exp(float64(burstSel>>11) / (1 << 53) * math.Log(1e9))
	if burstSel&3 == 0 {
		burst = math.Round(burst)
	}
	burst = min(max(math.Round(burst*1000)/1000, 1), 1e9)
	const year = 366 * 86400
	if burst/rate > year {
		burst = max(1, math.Floor(rate*year*1000*(1-1e-12))/1000)
	}
	return rate, burst
}

// op is one decoded step: a clock move, a key and a cost.
type op struct {
	dt   int64 // signed nanoseconds, applied with saturation
	key  int
	cost float64
}

// decode turns fuzzer bytes into steps, 4 bytes each. Clock moves cover the
// cases that broke other limiters: none, ±1 ns, ±1 µs, small and huge
// backward jumps, forward jumps just below, at and above the fill time, the
// largest forward jump, and jumps around the packed timestamp's horizon.
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
		ops = append(ops, op{dt, k % keys, cost})
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

// FuzzSkew drives one engine and the reference spec with the same hostile
// clock and cost stream (shadow protocol: the spec applies the engine's
// decisions and checks them) and checks at every step:
//
//	P1  0 <= tokens <= burst, Remaining included
//	P2  the engine never holds more than the spec, and trails it by less
//	    than two quanta plus two ticks of refill (for keys touched within half
//	    the horizon; older ones may only be later, never earlier)
//	P3  via P2: admissions never exceed the spec's, whatever the clock
//	P4  a time before a bucket's last update counts as that update
//	P6  any jump of at least the fill time refills to exactly full
//	P9  a denial changes nothing (the spec does not move; P2 still holds)
//	P10 cost 0 is always allowed and takes nothing; costs above the burst,
//	    negative, NaN or infinite are denied with RetryAfter = InfDuration
//	P11 RetryAfter is never shorter than the exact wait, and longer by less
//	    than the slack's worth of refill plus two ticks
func FuzzSkew(f *testing.F) {
	f.Add(uint64(1<<63), uint64(1<<62), uint8(1), []byte{0, 0, 0, 1, 1, 0, 0, 1, 2, 0, 0, 1, 7, 128, 0, 1, 9, 0, 0, 1, 8, 0, 0, 1})
	f.Add(uint64(0), uint64(0), uint8(2), []byte{3, 5, 0, 3, 4, 200, 1, 4, 10, 128, 0, 1, 11, 0, 1, 2, 5, 255, 0, 6})
	f.Add(uint64(math.MaxUint64), uint64(math.MaxUint64), uint8(3), []byte{13, 1, 0, 1, 13, 2, 1, 1, 6, 40, 0, 1, 12, 9, 2, 200, 10, 0, 0, 3})
	f.Add(uint64(8), uint64(4), uint8(1), []byte{0, 0, 0, 1, 13, 1, 0, 1, 13, 1, 0, 1, 13, 1, 0, 1, 13, 1, 0, 1})
	f.Fuzz(func(t *testing.T, rateSel, burstSel uint64, nkeys uint8, script []byte) {
		rate, burst := configFrom(rateSel, burstSel)
		e, err := engine.New(engine.Config{Limit: engine.Limit(rate), Burst: burst, SweepInterval: -1})
		if err != nil {
			t.Fatalf("New(rate=%v, burst=%v) in the documented domain: %v", rate, burst, err)
		}
		defer e.Close()
		s := newSpec(rate, burst)
		p := e.Precision()
		tick := int64(p.Tick)
		fill := int64(burst / rate * 1e9)
		horizon := int64(min(p.Horizon, time.Duration(1<<62)))
		keys := int(nkeys%4) + 1
		// slack = 0.002 token + 2*(tick-1 ns) of refill, as documented.
		slack := new(big.Rat).Add(big.NewRat(2, 1000), new(big.Rat).Mul(s.rate, big.NewRat(2*(tick-1), 1e9)))
		slackTime := new(big.Rat).Quo(slack, s.rate) // seconds of refill it amounts to

		base := time.Unix(0, 0)
		if rateSel&16 != 0 {
			base = time.Time{} // a virtual clock starting at year 1
		}
		var abs, first int64 // virtual ns since base; the engine's epoch
		started := false
		var newest int64 // latest write time the engine has seen (its reference)
		touched := map[string]int64{}

		for i, o := range decode(script, fill, horizon, tick, burst, keys) {
			abs = addSat(abs, o.dt)
			if !started {
				first, started = abs, true
			}
			ns := clampNS(abs - first)
			key := fmt.Sprint("k", o.key)
			at := base.Add(time.Duration(abs))
			exact, m := s.level(key, ns)
			fresh := ns-touched[key] < horizon/2 && newest-touched[key] < horizon/2
			if _, seen := s.buckets[key]; !seen {
				fresh = true
			}
			d := e.AllowAt(at, key, o.cost)
			where := func() string {
				return fmt.Sprintf("op %d (dt=%d key=%s cost=%v) rate=%v burst=%v at %d ns: %+v; exact tokens %v",
					i, o.dt, key, o.cost, rate, burst, ns, d, f64(exact))
			}
			if d.Remaining < 0 || d.Remaining > burst {
				t.Fatalf("P1: Remaining out of [0, burst]: %s", where())
			}
			c, ok := s.charge(o.cost)
			if !ok {
				if d.Allowed || d.RetryAfter != engine.InfDuration {
					t.Fatalf("P10: unsatisfiable cost not denied with InfDuration: %s", where())
				}
				continue
			}
			if c.Sign() == 0 && !d.Allowed {
				t.Fatalf("P10: a peek was denied: %s", where())
			}
			if d.Allowed && c.Sign() > 0 {
				if exact.Cmp(c) < 0 {
					t.Fatalf("P2/P3: admitted %v with only %v exact tokens: %s", f64(c), f64(exact), where())
				}
				s.spend(key, ns, c)
				touched[key] = m
				newest = max(newest, m)
				exact = new(big.Rat).Sub(exact, c)
			}
			if !d.Allowed {
				if fresh && exact.Cmp(new(big.Rat).Add(c, slack)) >= 0 {
					t.Fatalf("P2/P9: denied with %v exact tokens, at least cost + slack: %s", f64(exact), where())
				}
				// P11: the exact wait from the call's (clamped) time.
				wait := new(big.Rat).Quo(new(big.Rat).Sub(c, exact), s.rate)
				if wait.Sign() < 0 {
					wait.SetInt64(0)
				}
				wait.Add(wait, new(big.Rat).SetFrac(big.NewInt(m-ns), big.NewInt(1e9)))
				got := new(big.Rat).SetFrac(big.NewInt(int64(d.RetryAfter)), big.NewInt(1e9))
				if d.RetryAfter <= 0 || got.Cmp(wait) < 0 {
					t.Fatalf("P11: RetryAfter %v shorter than the exact wait %vs: %s", d.RetryAfter, f64(wait), where())
				}
				upper := new(big.Rat).Add(wait, slackTime)
				upper.Add(upper, new(big.Rat).SetFrac(big.NewInt(2*tick), big.NewInt(1e9)))
				if fresh && got.Cmp(upper) > 0 {
					t.Fatalf("P11: RetryAfter %v longer than exact %vs + slack: %s", d.RetryAfter, f64(wait), where())
				}
			}
			// P2 on the engine's own count, and P1.
			engineTokens := milli(e.TokensAt(at, key))
			gap := new(big.Rat).Sub(exact, engineTokens)
			if gap.Sign() < 0 {
				t.Fatalf("P2: engine holds %v, more than the exact %v: %s", f64(engineTokens), f64(exact), where())
			}
			if fresh && gap.Cmp(slack) >= 0 {
				t.Fatalf("P2: engine trails by %v, slack %v: %s", f64(gap), f64(slack), where())
			}
			if engineTokens.Sign() < 0 || engineTokens.Cmp(s.burst) > 0 {
				t.Fatalf("P1: engine tokens %v out of [0, burst]: %s", f64(engineTokens), where())
			}
			// P4: a time before the last update reads the same as that update.
			if b, ok := s.buckets[key]; ok && fresh && b.last > -timeBound+1 {
				before := milli(e.TokensAt(base.Add(time.Duration(first+b.last-1)), key))
				atLast := milli(e.TokensAt(base.Add(time.Duration(first+b.last)), key))
				if before.Cmp(atLast) != 0 {
					t.Fatalf("P4: tokens just before the last update %v differ from at it %v: %s", f64(before), f64(atLast), where())
				}
			}
			// P6: after a jump of the fill time the bucket is exactly full.
			if full := max(ns, m) + fill + 2*tick + int64(0.002/rate*1e9) + 1; fresh && full < timeBound {
				if got := e.TokensAt(base.Add(time.Duration(first+full)), key); got != burst {
					t.Fatalf("P6: %v tokens a fill time later, want burst %v: %s", got, burst, where())
				}
			}
		}
	})
}
