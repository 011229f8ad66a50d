package failpolicy

import (
	"fmt"
	"math"
	"strconv"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// Policy is what a store's Limiter answers when the store cannot decide: it
// is down, slower than the deadline, or refuses the call. The call returns
// that answer with its error.
type Policy int

const (
	// FailOpen allows the request and changes nothing: an outage lifts the
	// limit, it never blocks traffic.
	FailOpen Policy = iota
	// FailClosed denies the request, with RetryAfter the store's timeout.
	FailClosed
	// Fallback decides with a local engine.Engine holding a share of the
	// limit, so that N instances that each keep 1/N enforce about the
	// shared limit between them while the store is away.
	Fallback
)

func (p Policy) String() string {
	switch p {
	case FailOpen:
		return "fail-open"
	case FailClosed:
		return "fail-closed"
	case Fallback:
		return "fallback"
	}
	return "FailurePolicy(" + strconv.Itoa(int(p)) + ")"
}

// DefaultFallbackMaxKeys is the fallback engine's MaxKeys when a store's
// configuration leaves it 0: about 60 MB of buckets at most.
const DefaultFallbackMaxKeys = 1_000_000

// Check returns the error for a policy and its fallback fields, named as
// the stores' Configs name them (OnFailure, FallbackShare, FallbackMaxKeys),
// and with Fallback the Config of the fallback engine of a Limiter with
// limit and burst: share of both, its Burst rounded down to a multiple of
// 0.001 and at least one token, at most maxKeys buckets (0:
// DefaultFallbackMaxKeys, negative: unbounded). With peers (FallbackPeers)
// the policy must be Fallback and share 0: the engine starts with the whole
// limit (SharedFallback) and each failure gives it 1/peers.N() (Retune).
func Check(p Policy, limit engine.Limit, burst, share float64, maxKeys int, peers *Peers) (engine.Config, error) {
	if peers != nil {
		if p != Fallback || share != 0 {
			return engine.Config{}, fmt.Errorf("FallbackPeers must be nil unless OnFailure is Fallback and FallbackShare 0, got %v and %v", p, share)
		}
		return SharedFallback(limit, burst, maxKeys), nil
	}
	switch p {
	case FailOpen, FailClosed:
		if share != 0 {
			return engine.Config{}, fmt.Errorf("FallbackShare must be 0 unless OnFailure is Fallback, got %v", share)
		}
		if maxKeys != 0 {
			return engine.Config{}, fmt.Errorf("FallbackMaxKeys must be 0 unless OnFailure is Fallback, got %d", maxKeys)
		}
		return engine.Config{}, nil
	case Fallback:
	default:
		return engine.Config{}, fmt.Errorf("OnFailure must be FailOpen, FailClosed or Fallback, got %d", int(p))
	}
	if math.IsNaN(share) || share <= 0 || share > 1 {
		return engine.Config{}, fmt.Errorf("FallbackShare must be in (0, 1] with OnFailure Fallback, got %v", share)
	}
	b := math.Floor(burst*share*fixedpoint.QuantaPerToken) / fixedpoint.QuantaPerToken
	if b < 1 {
		return engine.Config{}, fmt.Errorf("FallbackShare %v leaves the fallback Burst %v below 1 token", share, burst*share)
	}
	cfg := engine.Config{Limit: limit * engine.Limit(share), Burst: b, MaxKeys: engineMaxKeys(maxKeys)}
	if err := engine.CheckLimit(cfg.Limit, cfg.Burst); err != nil {
		return engine.Config{}, fmt.Errorf("FallbackShare %v gives a fallback engine that is not valid: %w", share, err)
	}
	return cfg, nil
}

// engineMaxKeys is the fallback engine's MaxKeys for a store's
// FallbackMaxKeys: 0 picks DefaultFallbackMaxKeys, negative is the
// engine's unbounded (0).
// FallbackMaxKeys is the MaxKeys of a fallback engine (or quota) for a
// FallbackMaxKeys option: 0 picks DefaultFallbackMaxKeys, negative is
// unbounded.
func FallbackMaxKeys(maxKeys int) int { return engineMaxKeys(maxKeys) }

func engineMaxKeys(maxKeys int) int {
	switch {
	case maxKeys == 0:
		return DefaultFallbackMaxKeys
	case maxKeys < 0:
		return 0
	}
	return maxKeys
}
