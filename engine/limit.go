package engine

import (
	"math"
	"time"
)

// Limit is a refill rate in tokens per second.
type Limit float64

// InfDuration is the RetryAfter of a request that can never be satisfied: a
// cost above the burst, or one that is not a number.
const InfDuration = time.Duration(math.MaxInt64)

// Every converts the interval between two tokens to a Limit: Every(time.Second)
// is one token per second. A non-positive interval gives +Inf, which New
// rejects.
func Every(interval time.Duration) Limit {
	if interval <= 0 {
		return Limit(math.Inf(1))
	}
	return Limit(1e9 / float64(interval))
}
