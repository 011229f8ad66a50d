package httplimit

import (
	"sync"

	"github.com/faucetgo/faucet/engine"
)

// scratch is the memory one decision works in: its Result's policies, and
// its takes and their decisions, which the Limiter, an interface, would
// make escape to the heap from the stack. A decision borrows one
// (getScratch) and gives it back when nothing refers to it any more, so that
// in the steady state it allocates none of these.
type scratch struct {
	policies [maxTakes]Policy
	takes    [maxTakes]engine.Take
	out      [maxTakes]engine.Decision
	// shadowTake and shadowOut are a shadow rule's take, made on its own.
	shadowTake [1]engine.Take
	shadowOut  [1]engine.Decision
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// putScratch gives sc back, once nothing refers to its memory any more: its
// policies are the next decision's.
func putScratch(sc *scratch) {
	// Not to keep the request's strings and the Limiters alive in the pool.
	clear(sc.policies[:])
	clear(sc.takes[:])
	sc.shadowTake[0] = engine.Take{}
	scratchPool.Put(sc)
}
