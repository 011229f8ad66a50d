package httplimit

import (
	"sync"
	"time"
	"unsafe"

	"github.com/faucetgo/faucet/engine"
)

// scratch is the memory one decision works in: its Result's policies, its
// takes and their decisions (which the Limiter, an interface, would make
// escape to the heap from the stack), and buf, where keys are composed and
// a JWT payload decoded. A decision borrows one (getScratch) and gives it
// back when nothing refers to it any more, so that in the steady state it
// allocates none of these.
type scratch struct {
	policies [maxTakes]Policy
	takes    [maxTakes]engine.Take
	out      [maxTakes]engine.Decision
	// shadowTake and shadowOut are a shadow rule's takes, one per limit,
	// made on their own.
	shadowTake [maxLimits]engine.Take
	shadowOut  [maxLimits]engine.Decision
	// calendars are the keys' own calendars of the takes that have one:
	// one per take, then one per shadow take.
	calendars [maxTakes + maxLimits]engine.Calendar
	// reservations are the takes of a request that may wait (delay mode);
	// waiter keeps those not due yet, if it waits.
	reservations [maxTakes]engine.Reservation
	waiter       *waiter
	// slots are the in-flight slots the request holds, nslots of them,
	// taken at slotsAt.
	slots   [maxTakes]heldSlot
	nslots  int
	slotsAt time.Time
	// observers are the adaptive rules that applied, nobs of them: the
	// response is reported to them.
	observers [maxTakes]*ruleAdaptive
	nobs      int
	// buf is only appended to during a decision, so that the strings a
	// decision borrowed from it (borrowed) keep their bytes until the
	// scratch is put back.
	buf []byte
}

// maxScratchBytes bounds the buffer a scratch keeps between decisions: room
// for the largest token (maxJWTBytes), its payload and the keys. A decision
// that needed more (long composed keys) leaves its buffer to the garbage
// collector.
const maxScratchBytes = 16 << 10

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// putScratch gives sc back, once nothing refers to its memory any more: its
// policies and bytes are the next decision's.
func putScratch(sc *scratch) {
	// Not to keep the request's strings and the Limiters alive in the pool.
	clear(sc.policies[:])
	clear(sc.takes[:])
	clear(sc.shadowTake[:])
	clear(sc.calendars[:])
	clear(sc.reservations[:])
	sc.waiter = nil
	clear(sc.slots[:sc.nslots])
	sc.nslots = 0
	clear(sc.observers[:sc.nobs])
	sc.nobs = 0
	if cap(sc.buf) > maxScratchBytes {
		sc.buf = nil
	}
	sc.buf = sc.buf[:0]
	scratchPool.Put(sc)
}

// borrowed is b, bytes of a scratch's buffer, as a string that shares them:
// it keeps its bytes until the scratch is put back (or its buffer given away,
// request.keep).
func borrowed(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
