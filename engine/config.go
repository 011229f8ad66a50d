package engine

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("engine: invalid config")

// Config describes an Engine. Limit and Burst are required; the zero value of
// every other field picks a documented default.
type Config struct {
	// Limit is the refill rate of every bucket, in tokens per second: at
	// least one token per 366 days (1/31622400), for quotas such as 12 a
	// year, and at most 1e9.
	Limit Limit
	// Burst is the capacity of every bucket in tokens, and what a new key
	// starts with: from 1 to 1e9, a multiple of 0.001, and small enough that
	// an empty bucket refills within 366 days (Burst/Limit, in float64, at
	// most 31,622,400 s).
	Burst float64
	// Shards is the number of independent partitions of the key table, a
	// power of two up to 65536. 0 picks 32 per usable CPU (GOMAXPROCS),
	// rounded up to a power of two, and at least 256. A shard's index is
	// rebuilt, under the shard's mutex, each time it grows by about 1.3,
	// and inserts into the shard, and takes on its keys, wait for the
	// rebuild: more shards mean shorter pauses; an empty shard costs about
	// 320 bytes.
	Shards int
	// SweepInterval is how often the background sweeper evicts full
	// buckets, which only frees memory: decisions are the same with or
	// without sweeps. 0 picks 10 s; a negative value starts no sweeper
	// (engines on a virtual clock call SweepAt when they like); a positive
	// value must be at least 1 ms.
	SweepInterval time.Duration
	// MaxKeys bounds the number of live buckets at every instant; 0 means
	// unbounded. When it is reached a new key first evicts a full bucket
	// (lossless); if none can go, OnFull decides, and the call is counted in
	// Stats.Overflow.
	MaxKeys int
	// OnFull is what a key without a bucket gets while MaxKeys buckets are
	// live and none of them is full: the zero value, FullShare, limits all
	// such keys together through one shared bucket; FullDeny denies them.
	OnFull FullPolicy
}

// FullPolicy decides the keys that find the table full (Config.OnFull).
// Neither lets such a key past the limit: a table filled with keys, by a
// flood of distinct ones, must never switch the limit off.
type FullPolicy int

const (
	// FullShare takes the tokens of every key that finds the table full
	// from one overflow bucket of the engine's Limit and Burst, shared by
	// all of them, until room frees up (a bucket is full and can go). Those
	// keys together get at most Burst + Limit*t in any span t, and one key
	// at most twice that (its own bucket's bound, before and after, plus the
	// overflow bucket's); keys that have buckets are not affected. Under a
	// flood of new keys, new clients share the flood's bucket: traffic
	// goes on, limited, and no one gains from sending new keys.
	FullShare FullPolicy = iota
	// FullDeny denies every key that finds the table full, with RetryAfter
	// the time until a bucket the last eviction scan saw will be full: a
	// flood of new keys then locks out new clients instead.
	FullDeny
)

func (p FullPolicy) String() string {
	switch p {
	case FullShare:
		return "share"
	case FullDeny:
		return "deny"
	}
	return "FullPolicy(" + strconv.Itoa(int(p)) + ")"
}

const (
	minLimit       = 1.0 / maxFillSeconds
	maxLimit       = 1e9
	minBurst       = 1
	maxBurst       = 1e9
	maxFillSeconds = 366 * 86400
	maxShards      = 1 << 16
	defaultSweep   = 10 * time.Second
	minSweep       = time.Millisecond
	shardsPerCPU   = 32
	minShards      = 256
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// CheckLimit returns nil if New and SetAt accept limit and burst, or what
// they would return: a *LimitError for each problem (errors.Join of them
// when both fields are wrong), each wrapping ErrInvalidConfig. It is for
// callers that validate a configuration before building anything (a rules
// file, a store's options), and that name the fields their own way
// (LimitErrors).
func CheckLimit(limit Limit, burst float64) error {
	_, err := layoutFor(limit, burst)
	return err
}

// LimitError is one problem with a Limit and Burst: a field outside the
// engine's domain. It wraps ErrInvalidConfig.
type LimitError struct {
	// Field is "Limit", "Burst", or "Burst/Limit" (the time to refill an
	// empty bucket).
	Field string
	// Must says what the field must be, after "must": "be between 1 and
	// 1e9 tokens".
	Must string
	// Got is the value the field had, as the message shows it.
	Got string
}

func (e *LimitError) Error() string {
	return ErrInvalidConfig.Error() + ": " + e.Field + " must " + e.Must + ", got " + e.Got
}

func (e *LimitError) Unwrap() error { return ErrInvalidConfig }

// LimitErrors returns the problems in an error of CheckLimit: none for nil,
// else one per field at fault.
func LimitErrors(err error) []*LimitError {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*LimitError
		for _, e := range j.Unwrap() {
			out = append(out, LimitErrors(e)...)
		}
		return out
	}
	if le, ok := err.(*LimitError); ok {
		return []*LimitError{le}
	}
	return nil
}

// layout validates the rate and burst and derives the word layout.
func (c *Config) layout() (*fixedpoint.Layout, error) { return layoutFor(c.Limit, c.Burst) }

// layoutFor is the layout of limit and burst, or every problem with them.
func layoutFor(limit Limit, burst float64) (*fixedpoint.Layout, error) {
	r, b := float64(limit), burst
	var errs []error
	if math.IsNaN(r) || r < minLimit || r > maxLimit {
		errs = append(errs, &LimitError{"Limit", "be between 1/31622400 (one token per 366 days) and 1e9 tokens per second", fmt.Sprint(r)})
	}
	capacity, exact := fixedpoint.QuantizeExact(b)
	switch {
	case math.IsNaN(b) || b < minBurst || b > maxBurst:
		errs = append(errs, &LimitError{"Burst", "be between 1 and 1e9 tokens", fmt.Sprint(b)})
	case !exact:
		errs = append(errs, &LimitError{"Burst", "be a multiple of 0.001 tokens", fmt.Sprint(b)})
	}
	switch len(errs) {
	case 1:
		return nil, errs[0]
	case 2:
		return nil, errors.Join(errs...)
	}
	// In float64, as the caller computes it: 12 a year is Limit 12/31622400,
	// a float a hair below the true quotient, and with Burst 12 it must fill
	// in 366 days, not in 366 days and a femtosecond.
	if fill := b / r; fill > maxFillSeconds {
		return nil, &LimitError{"Burst/Limit", "be at most 366 days (31622400 s), the time to refill an empty bucket", fmt.Sprintf("%v s", fill)}
	}
	l, err := fixedpoint.NewLayout(capacity, r)
	if err != nil {
		return nil, &LimitError{"Limit", fmt.Sprintf("be representable with Burst %v (%v)", b, err), fmt.Sprint(r)}
	}
	return l, nil
}

// shards validates Shards and returns the count to use.
func (c *Config) shards(procs int) (int, error) {
	n := c.Shards
	if n == 0 {
		return min(maxShards, max(minShards, 1<<bits.Len(uint(shardsPerCPU*procs-1)))), nil
	}
	if n < 1 || n > maxShards || n&(n-1) != 0 {
		return 0, invalid("Shards must be 0 or a power of two from 1 to 65536, got %d", n)
	}
	return n, nil
}

// sweepInterval validates SweepInterval and returns the interval to use
// (negative: no sweeper).
func (c *Config) sweepInterval() (time.Duration, error) {
	switch {
	case c.SweepInterval < 0:
		return -1, nil
	case c.SweepInterval == 0:
		return defaultSweep, nil
	case c.SweepInterval < minSweep:
		return 0, invalid("SweepInterval must be negative (no sweeper), 0 (default 10s) or at least %v, got %v", minSweep, c.SweepInterval)
	}
	return c.SweepInterval, nil
}

func (c *Config) maxKeys() (int64, error) {
	if c.MaxKeys < 0 {
		return 0, invalid("MaxKeys must be 0 (unbounded) or positive, got %d", c.MaxKeys)
	}
	if c.OnFull != FullShare && c.OnFull != FullDeny {
		return 0, invalid("OnFull must be FullShare or FullDeny, got %d", int(c.OnFull))
	}
	return int64(c.MaxKeys), nil
}
