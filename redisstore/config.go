package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/remote"
)

// ErrInvalidConfig is wrapped by every error New and NewGoRedis return for a
// bad Config. Errors about Limit and Burst also wrap engine.ErrInvalidConfig,
// since they are the engine's own checks.
var ErrInvalidConfig = errors.New("redisstore: invalid config")

// FailurePolicy is what a Limiter answers when the store cannot decide:
// Redis is down, slow past the deadline, or the reply is malformed
// (Config.OnFailure). The call returns that answer with its error. The
// policies are every remote store's.
type FailurePolicy = failpolicy.Policy

const (
	// FailOpen allows the request and changes nothing. A store outage then
	// lifts the limit; it never blocks traffic.
	FailOpen = failpolicy.FailOpen
	// FailClosed denies the request, with RetryAfter the Limiter's Timeout.
	FailClosed = failpolicy.FailClosed
	// Fallback decides with a local engine.Engine whose Limit and Burst are
	// FallbackShare of the Config's, so that N instances that each keep
	// 1/N enforce about the global limit between them while Redis is away.
	Fallback = failpolicy.Fallback
)

// Peers counts the instances that share the store, from the store's
// heartbeats; each instance's fallback keeps 1/N of a shared limit.
// Store.Peers returns the count a Store keeps.
type Peers = failpolicy.Peers

// Config describes a Limiter. Limit and Burst are required and mean what they
// mean in engine.Config, with the same ranges; the zero value of every other
// field picks a documented default.
type Config struct {
	// Limit is the refill rate in tokens per second, from 1/31622400 (one
	// token per 366 days) to 1e9.
	Limit engine.Limit
	// Burst is the bucket capacity in tokens, from 1 to 1e9, a multiple of
	// 0.001, and at most 366 days of refill.
	Burst float64
	// Prefix starts every Redis key of this Limiter; "" picks "faucet:". It
	// may not contain '{' or '}', so that the hash tag is always the key's
	// (see KeyFor). Limiters share buckets when they share the server, the
	// Prefix, the Limit and the Burst: the keys also name the limit, so
	// limiters with different ones never see each other's buckets.
	Prefix string
	// Timeout bounds every call to Redis, on top of any deadline of the
	// caller's context; 0 picks DefaultTimeout, 100 ms. A call that exceeds it counts as a
	// store failure and is answered by OnFailure.
	Timeout time.Duration
	// OnFailure is the answer when the store fails; the zero value is
	// FailOpen.
	OnFailure FailurePolicy
	// FallbackShare is, with OnFailure Fallback, the share of Limit and Burst
	// the local engine gets, in (0, 1]: typically 1/instances. Its Burst is
	// rounded down to a multiple of 0.001 and must stay at least 1 token.
	// It must be 0 with the other policies.
	FallbackShare float64
	// FallbackMaxKeys bounds the live buckets of the fallback engine
	// (engine.Config.MaxKeys), so that a flood of new keys during an outage
	// cannot grow the process without end; keys beyond it share the
	// engine's overflow bucket. 0 picks 1,000,000; a negative value means
	// unbounded. It must be 0 with the other policies.
	FallbackMaxKeys int
	// FallbackPeers, with OnFailure Fallback and FallbackShare 0, makes
	// the fallback's share 1/FallbackPeers.N() at each failure: the
	// instances the store's heartbeats last counted (a Store's own). It
	// must be nil with a FallbackShare or another policy.
	FallbackPeers *Peers
	// BreakAfter is the number of consecutive store failures after which the
	// Limiter stops calling Redis for BreakFor and answers every call by
	// OnFailure at once, so that an outage costs each request nothing rather
	// than a Timeout. 0 picks 5; a negative value never breaks.
	BreakAfter int
	// BreakFor is how long the breaker stays open; 0 picks 1 s. After it the
	// next call tries Redis again, and one success closes the breaker.
	BreakFor time.Duration
	// MaxBatch is the most single-key checks (Take, Allow, Tokens, a
	// TakeAll of one take) one script makes. A check made while four of
	// the Limiter's scripts are already on their way waits for one of them
	// to return and then goes with the other checks that waited, each
	// decided on its own, as if alone; a check that finds the way free goes
	// at once. 0 picks 64; 1 sends every check alone; at most 1000. Redis
	// Cluster clients always send checks alone.
	MaxBatch int
}

// DefaultTimeout is the Timeout of a Config (or StoreOptions) that leaves
// it 0.
const DefaultTimeout = remote.DefaultTimeout

const (
	defaultPrefix   = "faucet:"
	defaultMaxBatch = 64
	maxMaxBatch     = 1000
	// maxExact is 2^53: Lua numbers are float64, exact for integers below it.
	maxExact = 1 << 53
	// maxPQ bounds the rate fraction's numerator and denominator.
	maxPQ = 1<<52 - 1
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// units is the integer form of a Config the scripts work in: capacity in
// quanta (thousandths of a token), the rate as p/q quanta per microsecond,
// and fill, a number of microseconds that refills an empty bucket from any
// phase (longer gaps are cut to it before multiplying).
type units struct {
	capacity, p, q, fill uint64
	// exact reports that p/q is the configured rate exactly; otherwise it is
	// the closest fraction below it that keeps every value under 2^53.
	exact bool
}

// never is the script cost of a take that can never pass: a report (no
// take) for a cost of capacity+1, which reportCost caps at capacity, and
// which no report for a real cost (at most capacity) can be.
func (u units) never() uint64 { return 2*u.capacity + 2 }

// reportCost is the cost a denied take's RetryAfter waits for: the cost
// itself, or for a script cost c above the capacity (a report without a
// take) c-(capacity+1), at most the capacity (a take that can never pass
// reports a full refill).
func (u units) reportCost(c uint64) uint64 {
	if c > u.capacity {
		c -= u.capacity + 1
	}
	return min(c, u.capacity)
}

// unitsFor derives the script units of rate and burst, which the engine has
// already validated.
func unitsFor(rate, burst float64) (units, error) {
	capacity, _ := fixedpoint.QuantizeExact(burst)
	// Quanta per microsecond: rate * 1000 / 1e6, exactly, from the float64.
	r := new(big.Rat).SetFloat64(rate)
	r.Quo(r, big.NewRat(1000, 1))
	// p and q stay below 2^52 so that muldiv's doubled remainders stay
	// below 2^53. Among the fractions that fit, prefer those with p*q below
	// 2^53 (the scripts then never need muldiv's slow path for a phase):
	// with q up to sqrt(2^53/r), the best lower fraction is within about
	// 2^-53 of r, which is close in relative terms unless r is tiny. A slow
	// rate (a token a day or a year) rounded so would shift its refill
	// instants, which the grid counts from 1970, by up to a millisecond:
	// those take the closest fraction below 2^52 instead, and the slow path.
	pmax := big.NewInt(maxPQ)
	qmax := big.NewInt(maxPQ)
	p, q, exact := lowerFraction(r, qmax, pmax)
	if !exact {
		f, _ := r.Float64()
		if s := math.Sqrt(maxExact / f); s < maxPQ {
			sp, sq, _ := lowerFraction(r, big.NewInt(int64(s)), pmax)
			if relGap(r, sp, sq) <= 1.0/(1<<53) {
				p, q = sp, sq
			}
		}
	}
	if p.Sign() == 0 {
		return units{}, invalid("Limit %v with Burst %v cannot be represented in the store's units", rate, burst)
	}
	u := units{capacity: capacity, p: p.Uint64(), q: q.Uint64(), exact: exact}
	// fill = ceil(capacity*q/p) microseconds.
	f := new(big.Int).Mul(new(big.Int).SetUint64(capacity), q)
	f.Add(f, new(big.Int).Sub(p, big.NewInt(1)))
	f.Quo(f, p)
	u.fill = f.Uint64()
	return u, nil
}

// relGap is (r - p/q) / r.
func relGap(r *big.Rat, p, q *big.Int) float64 {
	gap := new(big.Rat).Sub(r, new(big.Rat).SetFrac(p, q))
	f, _ := gap.Quo(gap, r).Float64()
	return f
}

// lowerFraction returns the fraction p/q <= r with q <= qmax and p <= pmax
// closest to r, and whether it equals r. It walks r's continued fraction:
// the best lower approximations are its even convergents and the
// semiconvergents between them.
func fitsBoth(r *big.Rat, pmax, qmax *big.Int) bool {
	return r.Num().Cmp(pmax) <= 0 && r.Denom().Cmp(qmax) <= 0
}

func lowerFraction(r *big.Rat, qmax, pmax *big.Int) (p, q *big.Int, exact bool) {
	if fitsBoth(r, pmax, qmax) {
		return new(big.Int).Set(r.Num()), new(big.Int).Set(r.Denom()), true
	}
	fits := func(p, q *big.Int) bool { return p.Cmp(pmax) <= 0 && q.Cmp(qmax) <= 0 }
	// Convergents h/k; (h0/k0) is the previous, (h1/k1) the current.
	h0, k0 := big.NewInt(0), big.NewInt(1)
	h1, k1 := big.NewInt(1), big.NewInt(0)
	num, den := new(big.Int).Set(r.Num()), new(big.Int).Set(r.Denom())
	bestP, bestQ := big.NewInt(0), big.NewInt(1)
	for i := 0; den.Sign() != 0; i++ {
		a, rem := new(big.Int).QuoRem(num, den, new(big.Int))
		h2 := new(big.Int).Add(new(big.Int).Mul(a, h1), h0)
		k2 := new(big.Int).Add(new(big.Int).Mul(a, k1), k0)
		if i%2 == 0 {
			// Even convergents lie below r: the semiconvergents
			// (h0 + j*h1)/(k0 + j*k1), j = 1..a, rise toward h2/k2.
			if fits(h2, k2) {
				bestP, bestQ = h2, k2
			} else {
				// Largest j that fits.
				j := new(big.Int).Set(a)
				if k1.Sign() > 0 {
					jq := new(big.Int).Quo(new(big.Int).Sub(qmax, k0), k1)
					if jq.Cmp(j) < 0 {
						j = jq
					}
				}
				if h1.Sign() > 0 {
					jp := new(big.Int).Quo(new(big.Int).Sub(pmax, h0), h1)
					if jp.Cmp(j) < 0 {
						j = jp
					}
				}
				if j.Sign() > 0 {
					bestP = new(big.Int).Add(h0, new(big.Int).Mul(j, h1))
					bestQ = new(big.Int).Add(k0, new(big.Int).Mul(j, k1))
				}
				break
			}
		} else if !fits(h2, k2) {
			break
		}
		h0, k0, h1, k1 = h1, k1, h2, k2
		num, den = den, rem
	}
	g := new(big.Int).GCD(nil, nil, bestP, bestQ)
	if g.Sign() > 0 {
		bestP.Quo(bestP, g)
		bestQ.Quo(bestQ, g)
	}
	return bestP, bestQ, false
}

// settings is a validated Config with its defaults applied.
type settings struct {
	Config
	// common is what every remote store checks, with the fallback
	// engine's Config.
	common  remote.Settings
	u       units
	capArg  string
	pArg    string
	qArg    string
	fillArg string
	// keyBase starts every bucket's key: Prefix and the limit's tag.
	keyBase  string
	maxBatch int
}

// Check returns nil if New and NewGoRedis accept c, or the error they would
// return for it, which wraps ErrInvalidConfig and names the field and its
// range. It builds nothing (no connection, no fallback engine), so that
// callers can validate a Limiter's configuration, or a store's options
// that become one, before they have a client.
func (c Config) Check() error {
	_, err := c.settings()
	return err
}

// validate checks c, applies its defaults, and builds the Limiter's core:
// the breaker and, if OnFailure is Fallback, the fallback engine.
func (c Config) validate() (*settings, *remote.Core, error) {
	s, err := c.settings()
	if err != nil {
		return nil, nil, err
	}
	core, err := remote.NewCore(s.common, ErrBreakerOpen)
	if err != nil {
		return nil, nil, err
	}
	return s, core, nil
}

// settings checks c and applies its defaults, without building anything.
// The checks run in the order of Config's fields, so that the error names
// the first field that is wrong.
func (c Config) settings() (*settings, error) {
	s := &settings{Config: c, common: remote.Settings{Invalid: ErrInvalidConfig,
		Limit: c.Limit, Burst: c.Burst, Timeout: c.Timeout,
		OnFailure: c.OnFailure, FallbackShare: c.FallbackShare, FallbackMaxKeys: c.FallbackMaxKeys, FallbackPeers: c.FallbackPeers,
		BreakAfter: c.BreakAfter, BreakFor: c.BreakFor}}
	common := &s.common
	err := remote.Check(common.CheckLimit, s.applyPrefix, common.CheckTimeout, common.CheckBreaker,
		s.applyMaxBatch, common.CheckFailure, s.applyUnits)
	if err != nil {
		return nil, err
	}
	s.Timeout, s.BreakAfter, s.BreakFor = common.Timeout, common.BreakAfter, common.BreakFor
	return s, nil
}

func (s *settings) applyPrefix() error {
	if s.Prefix == "" {
		s.Prefix = defaultPrefix
	}
	if strings.ContainsAny(s.Prefix, "{}") {
		return invalid("Prefix must not contain '{' or '}', got %q", s.Prefix)
	}
	return nil
}

func (s *settings) applyMaxBatch() error {
	switch {
	case s.MaxBatch < 0 || s.MaxBatch > maxMaxBatch:
		return invalid("MaxBatch must be 0 (default %d) or from 1 to %d, got %d", defaultMaxBatch, maxMaxBatch, s.MaxBatch)
	case s.MaxBatch == 0:
		s.MaxBatch = defaultMaxBatch
	}
	s.maxBatch = s.MaxBatch
	return nil
}

// applyUnits derives the scripts' units, their arguments and the keys'
// base.
func (s *settings) applyUnits() error {
	u, err := unitsFor(float64(s.Limit), s.Burst)
	if err != nil {
		return err
	}
	s.u = u
	s.capArg = strconv.FormatUint(u.capacity, 10)
	s.pArg = strconv.FormatUint(u.p, 10)
	s.qArg = strconv.FormatUint(u.q, 10)
	s.fillArg = strconv.FormatUint(u.fill, 10)
	s.keyBase = s.Prefix + u.tag()
	return nil
}

// tag names the limit in bucket keys: 16 hex digits of a SHA-256 of the
// capacity and the rate fraction, the numbers the scripts compute with, so
// that two Configs whose buckets would behave differently never share a
// key, and two that the store cannot tell apart do.
func (u units) tag() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "faucet bucket v1 capacity=%d p=%d q=%d", u.capacity, u.p, u.q))
	return hex.EncodeToString(sum[:8])
}
