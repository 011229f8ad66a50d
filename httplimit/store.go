package httplimit

import (
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
}

// NewMemoryStore returns a store that keeps each rule's buckets in an
// engine.Engine in this process (engine.NewEnginePool). Limiters that share
// one share the buckets of rules with the same name and limit_keys, with the
// rate and burst of the last New or Reload that bound them. Close stops the
// engines' sweepers.
func NewMemoryStore(opts MemoryOptions) *engine.Pool {
	return engine.NewEnginePool(engine.Config{MaxKeys: opts.MaxKeys, OnFull: opts.OnFull, SweepInterval: opts.SweepInterval})
}
