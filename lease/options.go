package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// ErrInvalidOptions is wrapped by the error for bad Options; so is
// engine.ErrInvalidConfig.
var ErrInvalidOptions = fmt.Errorf("%w: lease options", engine.ErrInvalidConfig)

// Options configures a Leased limiter; the zero value picks every default.
type Options struct {
	// Lifetime is how long a lease lasts; 0 picks 1 s, at least 10 ms. An
	// instance stops spending a lease a little before it ends (the store
	// counts from its own clock, which reads later than the instance's
	// send), and releases what is left of an idle one early; tokens left in
	// a lease that ends unreleased (the instance died) are lost to the
	// shared bucket, never admitted twice.
	Lifetime time.Duration
	// MaxShare is the most of the burst one lease holds, in (0, 1]; 0 picks
	// 0.1. It bounds what one instance can keep from the others.
	MaxShare float64
	// MaxKeys bounds the keys that hold a lease at once; 0 picks 100,000.
	// A key beyond it leases exactly its cost, as a per-check call would.
	MaxKeys int
	// CloseStore makes Close close the Store too, when it has a Close
	// method (a store's NewStore sets it for the limiters it builds).
	CloseStore bool
}

// Check returns nil if New accepts o, or the error it would return, which
// names the field and its range.
func (o Options) Check() error {
	_, err := o.resolve()
	return err
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
}

// resolve checks o and fills in its defaults.
func (o Options) resolve() (Options, error) {
	if o.Lifetime == 0 {
		o.Lifetime = time.Second
	}
	if o.Lifetime < 10*time.Millisecond {
		return o, invalid("Lifetime must be at least 10ms, got %v", o.Lifetime)
	}
	if o.MaxShare == 0 {
		o.MaxShare = 0.1
	}
	if !(o.MaxShare > 0 && o.MaxShare <= 1) {
		return o, invalid("MaxShare must be in (0, 1], got %v", o.MaxShare)
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = 100_000
	}
	if o.MaxKeys < 0 {
		return o, invalid("MaxKeys must be positive, or 0 for the default, got %d", o.MaxKeys)
	}
	return o, nil
}

// errNilStore is New's error for a nil Store.
var errNilStore = errors.New("lease: store must not be nil")
