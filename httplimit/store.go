package httplimit

import (
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// MemoryOptions configures NewMemoryStore; the zero value is usable.
type MemoryOptions struct {
	// MaxKeys bounds the live buckets of each rule (engine.Config.MaxKeys);
	// 0 means unbounded. Behind a public edge, where every client address
	// or header value makes a bucket, set it.
	MaxKeys int
	// OnFull decides the keys that find MaxKeys buckets live and none full
	// (engine.Config.OnFull): engine.FullShare, the default, limits them
	// together through one overflow bucket per rule, with the rule's rate
	// and burst; engine.FullDeny denies them. RuleStats.Overflow counts
	// them.
	OnFull engine.FullPolicy
	// SweepInterval is engine.Config.SweepInterval: 0 for the default.
	SweepInterval time.Duration
	// MaxBytesPerLimit, if positive, bounds what one limit's keys may cost
	// at MaxKeys (MaxKeys times engine.Spec.BytesPerKey): a rule whose
	// limit could exceed it (a strict window of many slots under a large
	// MaxKeys, or a strict window with MaxKeys 0, unbounded) fails to
	// bind, and New or Reload says by how much and what to lower.
	MaxBytesPerLimit int64
}

// NewMemoryStore returns a store that keeps each rule's buckets in an
// engine.Engine in this process (engine.NewEnginePool), and its calendar
// quotas and strict windows in an engine.Quota and an engine.Window. Limiters that share
// one share the buckets of rules with the same name and limit_keys, with the
// rate and burst of the last New or Reload that bound them. Close stops the
// engines' sweepers.
func NewMemoryStore(opts MemoryOptions) *engine.Pool {
	cfg := engine.Config{MaxKeys: opts.MaxKeys, OnFull: opts.OnFull, SweepInterval: opts.SweepInterval}
	if opts.MaxBytesPerLimit <= 0 {
		return engine.NewEnginePool(cfg)
	}
	return engine.NewInMemoryPool(func(s engine.Spec) (engine.Limiter, error) {
		if err := checkMemory(s, opts); err != nil {
			return nil, err
		}
		return engine.OpenInMemory(cfg, s)
	})
}

// checkMemory reports a limit whose keys could cost more than
// opts.MaxBytesPerLimit.
func checkMemory(s engine.Spec, opts MemoryOptions) error {
	per := int64(s.BytesPerKey())
	if opts.MaxKeys == 0 {
		if s.Window == 0 {
			return nil // unbounded keys, chosen: as a token bucket's always were
		}
		return fmt.Errorf("a strict window's keys cost %d bytes each, and they are unbounded (MaxKeys 0, --max-keys 0) while a limit may use %d MiB: bound the keys",
			per, opts.MaxBytesPerLimit>>20)
	}
	if need := int64(opts.MaxKeys) * per; need > opts.MaxBytesPerLimit {
		what := "lower the keys (MaxKeys, --max-keys)"
		if s.Window > 0 {
			what = "lower its slots or the keys (MaxKeys, --max-keys)"
		}
		return fmt.Errorf("%d keys of %d bytes each are %d MiB, above the %d MiB a limit may use: %s, or raise the bound (--max-limit-memory)",
			opts.MaxKeys, per, need>>20, opts.MaxBytesPerLimit>>20, what)
	}
	return nil
}
