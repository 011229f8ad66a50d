package pgstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/remote"
)

// ErrInvalidConfig is wrapped by every error for a bad Config, StoreOptions
// or Schema. Errors about Limit and Burst also wrap engine.ErrInvalidConfig.
var ErrInvalidConfig = errors.New("pgstore: invalid config")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// FailurePolicy is what a Limiter answers when the store cannot decide: the
// database is down, slow past the deadline, or refuses the statement
// (Config.OnFailure). The call returns that answer with its error. The
// policies are every remote store's.
type FailurePolicy = failpolicy.Policy

const (
	// FailOpen allows the request and changes nothing: an outage lifts the
	// limit, it never blocks traffic.
	FailOpen = failpolicy.FailOpen
	// FailClosed denies the request, with RetryAfter the Limiter's Timeout.
	FailClosed = failpolicy.FailClosed
	// Fallback decides with a local engine.Engine holding FallbackShare of
	// the limit, so that N instances keeping 1/N each enforce about the
	// shared limit between them while the database is away.
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
	// Limit is the refill rate in tokens per second, as engine.Config's.
	Limit engine.Limit
	// Burst is the bucket capacity in tokens, as engine.Config's.
	Burst float64
	// Table holds the buckets (see Install); "" picks DefaultTable.
	Table string
	// Prefix starts every bucket's key in the table. Limiters share buckets
	// when they share the table, the Prefix, the Limit and the Burst: keys
	// also name the limit, so limiters with different ones never see each
	// other's buckets.
	Prefix string
	// Timeout bounds every statement, on top of any deadline of the
	// caller's context; 0 picks DefaultTimeout. A call that exceeds it
	// counts as a store failure and is answered by OnFailure.
	Timeout time.Duration
	// OnFailure is the answer when the store fails; the zero value is
	// FailOpen.
	OnFailure FailurePolicy
	// FallbackShare is, with OnFailure Fallback, the share of Limit and
	// Burst the local engine gets, in (0, 1]: typically 1/instances. Its
	// Burst is rounded down to a multiple of 0.001 and must stay at least 1
	// token. It must be 0 with the other policies.
	FallbackShare float64
	// FallbackMaxKeys bounds the fallback engine's live buckets
	// (engine.Config.MaxKeys): 0 picks 1,000,000, negative is unbounded. It
	// must be 0 with the other policies.
	FallbackMaxKeys int
	// FallbackPeers, with OnFailure Fallback and FallbackShare 0, makes
	// the fallback's share 1/FallbackPeers.N() at each failure: the
	// instances the store's heartbeats last counted (a Store's own). It
	// must be nil with a FallbackShare or another policy.
	FallbackPeers *Peers
	// BreakAfter is the number of consecutive store failures after which
	// the Limiter stops calling the database for BreakFor and answers every
	// call by OnFailure at once. 0 picks 5; negative never breaks.
	BreakAfter int
	// BreakFor is how long the breaker stays open; 0 picks 1 s. After it
	// the next call tries again, and one success closes the breaker.
	BreakFor time.Duration
	// DisableCoalescing sends every single take in a statement of its own,
	// instead of one statement at a time per key carrying the takes that
	// arrived meanwhile (see the package documentation, Coalescing). It is
	// for comparison only, in benchmarks: the decisions are the same, and
	// a hot key's statements queue on its row lock inside the database.
	DisableCoalescing bool
}

// DefaultTimeout is the Timeout of a Config that leaves it 0: a round trip
// to a database on the same network and one statement take well under a
// millisecond unless the database is in trouble.
const DefaultTimeout = remote.DefaultTimeout

const maxPrefix = 256

// settings is a validated Config with its defaults applied.
type settings struct {
	Config
	// common is what every remote store checks, with the fallback
	// engine's Config.
	common remote.Settings
	u      units
	// keyBase starts every bucket's key: Prefix and the limit's tag.
	keyBase string
	take    string // SQL calling Table_take
	takeAll string // SQL calling Table_take_all
	lockMS  int32  // lock_timeout of a take, in milliseconds
}

// Check returns nil if New accepts c, or the error it would return, which
// wraps ErrInvalidConfig and names the field and its range. It builds
// nothing.
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

// settings checks c's fields in their order, so that the error names the
// first that is wrong, and applies the defaults.
func (c Config) settings() (*settings, error) {
	s := &settings{Config: c, common: remote.Settings{Invalid: ErrInvalidConfig,
		Limit: c.Limit, Burst: c.Burst, Timeout: c.Timeout,
		OnFailure: c.OnFailure, FallbackShare: c.FallbackShare, FallbackMaxKeys: c.FallbackMaxKeys, FallbackPeers: c.FallbackPeers,
		BreakAfter: c.BreakAfter, BreakFor: c.BreakFor}}
	common := &s.common
	err := remote.Check(common.CheckLimit, s.applyTable, s.checkPrefix, common.CheckTimeout, common.CheckBreaker, common.CheckFailure)
	if err != nil {
		return nil, err
	}
	s.Timeout, s.BreakAfter, s.BreakFor = common.Timeout, common.BreakAfter, common.BreakFor
	if s.u, err = unitsFor(float64(s.Limit), s.Burst); err != nil {
		return nil, err
	}
	s.keyBase = s.Prefix + s.u.tag() + ":"
	s.take, s.takeAll = takeSQL(s.Table)
	// A row lock held past nine tenths of the deadline fails the statement
	// in the database, so that the error says for certain that nothing was
	// taken, rather than the deadline's "may have been".
	s.lockMS = int32(min(max(1, s.Timeout*9/10/time.Millisecond), math.MaxInt32))
	return s, nil
}

func (s *settings) applyTable() error {
	if s.Table == "" {
		s.Table = DefaultTable
	}
	return checkTable(s.Table)
}

func (s *settings) checkPrefix() error {
	if len(s.Prefix) > maxPrefix {
		return invalid("Prefix must be at most %d bytes, got %d", maxPrefix, len(s.Prefix))
	}
	return nil
}

// takeSQL is the statements that call table's take functions: one text
// each, which the driver prepares once per connection.
func takeSQL(table string) (take, takeAll string) {
	return `SELECT * FROM ` + ident(table+"_take") + `($1, $2, $3, $4, $5, $6, $7)`,
		`SELECT * FROM ` + ident(table+"_take_all") + `($1, $2, $3, $4, $5, $6, $7)`
}

// units is a limit in the functions' terms: capacity in quanta, the rate
// as an exact fraction p/q of quanta per microsecond (numeric in SQL, so no
// arithmetic rounds): the engine's rate, as fixedpoint.Layout keeps it.
type units struct {
	capacity   uint64
	p, q       *big.Int
	pArg, qArg string
}

func unitsFor(rate, burst float64) (units, error) {
	capacity, _ := fixedpoint.QuantizeExact(burst)
	layout, err := fixedpoint.NewLayout(capacity, rate)
	if err != nil {
		// engine.CheckLimit accepted the limit, which the engine builds a
		// layout for: this cannot happen.
		return units{}, invalid("Limit %v with Burst %v: %v", rate, burst, err)
	}
	// num / (5^6 * 2^shift) quanta per tick of 2^TickShift ns, times 1000
	// ns per microsecond.
	num, shift := layout.Rate()
	r := new(big.Rat).SetFrac(
		new(big.Int).Mul(new(big.Int).SetUint64(num), big.NewInt(1000)),
		new(big.Int).Lsh(big.NewInt(15625), shift+layout.TickShift()))
	u := units{capacity: capacity, p: new(big.Int).Set(r.Num()), q: new(big.Int).Set(r.Denom())}
	u.pArg, u.qArg = u.p.String(), u.q.String()
	return u, nil
}

// tag names the limit in bucket keys: 16 hex digits of a SHA-256 of the
// capacity and the rate fraction.
func (u units) tag() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "faucet pg bucket v1 capacity=%d p=%s q=%s", u.capacity, u.pArg, u.qArg))
	return hex.EncodeToString(sum[:8])
}

// never is the cost sent for a take that can never pass: above the
// capacity, it takes nothing and is denied.
func (u units) never() uint64 { return u.capacity + 1 }

// cost is the quanta a take of n asks for, or never.
func (u units) cost(n float64) uint64 {
	c, ok := fixedpoint.Quantize(n)
	if !ok || c > u.capacity {
		return u.never()
	}
	return c
}

// wait is how long until a bucket holding have quanta at microsecond at
// holds need, from microsecond now, to the nanosecond rounded up: the grid
// reaches G(at)+need-have at the instant (G(at)+need-have)*q/p.
func (u units) wait(at int64, have, need uint64, now int64) time.Duration {
	if have >= need {
		return 0
	}
	ph := new(big.Int).Mul(big.NewInt(at), u.p)
	ph.Mod(ph, u.q)
	x := new(big.Int).SetUint64(need - have)
	x.Mul(x, u.q)
	x.Sub(x, ph)
	x.Mul(x, big.NewInt(1000))
	x.Add(x, u.p)
	x.Sub(x, big.NewInt(1))
	x.Quo(x, u.p)
	return time.Duration(at-now)*time.Microsecond + time.Duration(x.Int64())
}
