package engine_test

import (
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// Tokens there already: a take, whose decision says what is left, and
// which a cancellation at the same instant undoes.
func TestReserveWithinNow(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 5})
	var r engine.Reservation
	d := e.ReserveWithin(&r, at(0), "k", 2, 0)
	if !d.Allowed || d.Remaining != 3 || !r.OK() || r.DelayFrom(at(0)) != 0 {
		t.Fatalf("ReserveWithin of 2 of 5 = %+v (OK %v, delay %v), want allowed, 3 left, no delay", d, r.OK(), r.DelayFrom(at(0)))
	}
	r.CancelAt(at(0))
	if d := e.AllowAt(at(0), "k", 5); !d.Allowed {
		t.Errorf("take of the whole burst after the cancellation = %+v, want allowed", d)
	}
}

// Tokens due within the wait are reserved, and the key's bytes may be
// reused at once: the cancellation finds the bucket by its own copy.
func TestReserveWithinWaits(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 1})
	if d := e.AllowAt(at(0), "k", 1); !d.Allowed {
		t.Fatal("first take denied")
	}
	key := []byte("k")
	var r engine.Reservation
	d := e.ReserveWithin(&r, at(0), string(key), 1, 100*time.Millisecond)
	if !d.Allowed || d.Remaining != 0 || r.DelayFrom(at(0)) != 100*time.Millisecond {
		t.Fatalf("ReserveWithin due in 100ms, waiting up to 100ms = %+v (delay %v), want allowed, 100ms", d, r.DelayFrom(at(0)))
	}
	if d.ResetAfter != 200*time.Millisecond {
		t.Errorf("ResetAfter = %v, want 200ms: the tokens at 100ms, then 100ms to refill one", d.ResetAfter)
	}
	key[0] = 'x'
	r.CancelAt(at(50 * time.Millisecond))
	if d := e.AllowAt(at(100*time.Millisecond), "k", 1); !d.Allowed {
		t.Errorf("take at 100ms after the cancellation = %+v, want allowed: the token was given back", d)
	}
}

// Tokens due later than the wait: nothing taken, and RetryAfter says when
// they would come.
func TestReserveWithinLate(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 1})
	e.AllowAt(at(0), "k", 1)
	var r engine.Reservation
	d := e.ReserveWithin(&r, at(0), "k", 1, 99*time.Millisecond)
	if d.Allowed || r.OK() || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("ReserveWithin due in 100ms, waiting up to 99ms = %+v (OK %v), want denied, retry after 100ms", d, r.OK())
	}
	if d := e.AllowAt(at(100*time.Millisecond), "k", 1); !d.Allowed {
		t.Errorf("take at 100ms = %+v, want allowed: the late reservation took nothing", d)
	}
	d = e.ReserveWithin(&r, at(time.Second), "k", 2, time.Hour)
	if d.Allowed || d.RetryAfter != engine.InfDuration {
		t.Errorf("ReserveWithin above the burst = %+v, want denied, InfDuration", d)
	}
}

// A reservation into the caller's memory that does not wait allocates
// nothing.
func TestReserveWithinAllocs(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 1e9, Burst: 1e9})
	var r engine.Reservation
	now := time.Now()
	e.ReserveWithin(&r, now, "k", 1, time.Second)
	if n := testing.AllocsPerRun(1000, func() { e.ReserveWithin(&r, now, "k", 1, time.Second) }); n != 0 {
		t.Errorf("ReserveWithin allocates %v times per call, want 0", n)
	}
}

// A clone is the reservation: cancelling it gives the tokens back, once.
func TestReservationClone(t *testing.T) {
	e := newEngine(t, engine.Config{Limit: 10, Burst: 1})
	e.AllowAt(at(0), "k", 1)
	var r engine.Reservation
	e.ReserveWithin(&r, at(0), "k", 1, time.Second)
	c := r.Clone()
	r = engine.Reservation{} // the caller's memory, reused
	if !c.OK() || c.DelayFrom(at(0)) != 100*time.Millisecond {
		t.Fatalf("clone: OK %v, delay %v; want OK, 100ms", c.OK(), c.DelayFrom(at(0)))
	}
	c.CancelAt(at(0))
	c.CancelAt(at(0))
	if d := e.AllowAt(at(100*time.Millisecond), "k", 1); !d.Allowed {
		t.Errorf("take at 100ms after cancelling the clone = %+v, want allowed", d)
	}
	if d := e.AllowAt(at(100*time.Millisecond), "k", 1); d.Allowed {
		t.Errorf("a second take at 100ms = %+v, want denied: the clone gave back once", d)
	}
}
