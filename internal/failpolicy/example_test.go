package failpolicy_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/internal/failpolicy"
)

// A store whose call failed answers by each take's policy, and says whether
// anything may have been taken.
func ExampleAnswer() {
	takes := []failpolicy.Take{
		{Policy: failpolicy.FailOpen, Burst: 50, Key: "user:7", N: 1},
		{Policy: failpolicy.FailClosed, Timeout: 100 * time.Millisecond, Key: "tenant:3", N: 1},
	}
	out := make([]engine.Decision, len(takes))
	denied, fellBack := failpolicy.Answer(takes, out)
	err := failpolicy.Error("mystore", errors.New("connection refused"), true, fellBack)
	fmt.Println(denied, out[1].RetryAfter)
	fmt.Println(err, errors.Is(err, engine.ErrUnavailable))
	// Output:
	// 1 100ms
	// mystore: store unavailable (nothing taken): connection refused true
}
