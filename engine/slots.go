package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SlotStore is a Store that can also keep in-flight slots: at most max
// requests of a key in flight at once, counted across every process that
// shares the store.
type SlotStore interface {
	Store
	// BindSlots returns the Slots of the in-flight limit name (a Spec.ID:
	// printable ASCII without spaces), whose keys are apart from every
	// other name's. Two BindSlots of one name, in one process or in two
	// sharing the store, count the same slots. Close the Slots when done:
	// it releases nothing that is held.
	BindSlots(name string) (Slots, error)
}

// Slots holds the requests in flight of each key of one in-flight limit,
// across every process that shares its store.
//
// A slot is held by a holder, an id its caller makes for each request
// (unique among the requests of the limit, such as 16 random bytes in
// hex), from Acquire until Release. A slot that is not renewed within TTL
// of its Acquire or last Renew is free again: its holder is taken to have
// died with its process. A holder that keeps a slot longer (a long
// request, a stream, a tunnel) renews it about every TTL/3, for example
// all of an instance's slots at once with each heartbeat, so that one
// late renewal does not free it.
//
// Counts are exact while every holder is alive and renews in time: Acquire
// never admits a key past max, across processes and under concurrency. A
// dead holder's slot is counted until it expires. Times are the store's
// clock, never the caller's.
//
// The methods' errors wrap ErrUnavailable when the store certainly did
// nothing, ErrOutcomeUnknown when it may have (a call that timed out after
// it was sent), and ErrInvalidSlot for bad arguments, which reach no
// store. An Acquire that fails took no slot, or one that expires after
// TTL: a caller may Release it to be sure. Slots are safe for concurrent
// use.
type Slots interface {
	// Acquire takes one of key's slots for holder if fewer than max are
	// held, and reports whether it did and how many key holds after it
	// (or, denied, holds). A holder that already holds one of key's slots
	// keeps it, renewed, and is admitted without taking another. A denial
	// changes nothing. max may change between calls (a reload): slots
	// held above a lowered max stay held, and Acquire denies until fewer
	// than max are. max must be at least 1 and holder non-empty.
	Acquire(ctx context.Context, key, holder string, max int) (ok bool, held int, err error)
	// Release gives back holder's slot of key; releasing a slot that is
	// not held (released, expired, never taken) does nothing.
	Release(ctx context.Context, key, holder string) error
	// Renew keeps every slot of held that is still held alive for another
	// TTL, in one round trip however many they are; a slot that expired
	// or was released is not taken again.
	Renew(ctx context.Context, held []SlotHold) error
	// TTL is how long a slot stays held without a renewal.
	TTL() time.Duration
	// Close ends the Slots' use; the slots held stay held until released
	// by another Slots of the name, or they expire.
	Close() error
}

// SlotHold is one slot a holder holds: of Key.
type SlotHold struct{ Key, Holder string }

// The bounds of a store's slot TTL: long enough that renewals every TTL/3
// survive a slow moment, short enough that a dead holder's slots come back
// while its clients still retry.
const (
	DefaultSlotTTL = 30 * time.Second
	MinSlotTTL     = time.Second
	MaxSlotTTL     = time.Hour
)

// MaxHolderBytes is the longest holder id a Slots accepts.
const MaxHolderBytes = 128

// ErrInvalidSlot is wrapped by the errors of Slots calls with bad
// arguments.
var ErrInvalidSlot = errors.New("engine: invalid slot call")

// CheckSlotTTL returns nil if ttl is 0 (DefaultSlotTTL) or within
// MinSlotTTL and MaxSlotTTL, else an error wrapping ErrInvalidConfig that
// names field.
func CheckSlotTTL(field string, ttl time.Duration) error {
	if ttl != 0 && (ttl < MinSlotTTL || ttl > MaxSlotTTL) {
		return &LimitError{Field: field, Must: fmt.Sprintf("be 0 (default %v) or from %v to %v", DefaultSlotTTL, MinSlotTTL, MaxSlotTTL),
			Got: ttl.String()}
	}
	return nil
}

// CheckSlotName returns nil if name may name an in-flight limit (as
// Spec.ID: printable ASCII without spaces, not empty).
func CheckSlotName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the in-flight limit's name must not be empty", ErrInvalidConfig)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: the in-flight limit's name must be printable ASCII without spaces, got %q", ErrInvalidConfig, name)
		}
	}
	return nil
}

// CheckSlotCall returns nil if an Acquire of key by holder with max (or,
// for max 1, a Release or Renew) is well formed, else an error wrapping
// ErrInvalidSlot that names the argument: max at least 1, holder from 1
// to MaxHolderBytes bytes. Any key is accepted.
func CheckSlotCall(holder string, max int) error {
	if max < 1 {
		return fmt.Errorf("%w: max must be at least 1, got %d", ErrInvalidSlot, max)
	}
	if holder == "" || len(holder) > MaxHolderBytes {
		return fmt.Errorf("%w: holder must be 1 to %d bytes, got %d", ErrInvalidSlot, MaxHolderBytes, len(holder))
	}
	return nil
}
