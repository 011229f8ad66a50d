package engine_test

import (
	"testing"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/engine/limitertest"
)

func TestConformance(t *testing.T) {
	limitertest.Run(t, limitertest.Harness{
		Open: func(t *testing.T, limit engine.Limit, burst float64) engine.Limiter {
			return newEngine(t, engine.Config{Limit: limit, Burst: burst})
		},
	})
}

// The calendar quotas a Pool of Engines binds pass the quota suite, on the
// virtual clock the suite drives.
func TestQuotaConformance(t *testing.T) {
	limitertest.RunQuota(t, limitertest.QuotaHarness{
		Store: func(t *testing.T) engine.Store { return engine.NewEnginePool(engine.Config{}) },
	})
}

// The strict windows a Pool of Engines binds pass the window suite, on the
// virtual clock the suite drives.
func TestWindowConformance(t *testing.T) {
	limitertest.RunWindow(t, limitertest.WindowHarness{
		Store: func(t *testing.T) engine.Store { return engine.NewEnginePool(engine.Config{}) },
	})
}
