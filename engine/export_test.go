package engine

// HoldReservation counts one live bucket that is not in the table yet, as a
// new key does between reserving room under MaxKeys and inserting its
// bucket; release gives the room back.
func HoldReservation(e *Engine) (release func()) {
	e.live.Add(1)
	return func() { e.live.Add(-1) }
}
