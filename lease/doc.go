// Package lease decides most checks of a shared store in the instance: a
// Leased limiter takes tokens from a key's shared bucket in leases and
// spends them locally with one CompareAndSwap and no I/O, while every
// instance together admits at most Burst + Limit × span in any span, as one
// bucket would.
//
// A store takes part by implementing Store, the lease contract: grant a
// lease (ending the caller's previous one in the same call), release one
// early, and answer a failed call with its failure policy. redisstore and
// pgstore Limiters implement it; New makes a Leased limiter on any of them:
//
//	l, err := pgstore.New(pool, pgstore.Config{Limit: 100, Burst: 100})
//	...
//	s, err := lease.New(l, lease.Options{})
//	defer s.Close()
//	d, err := s.Take(ctx, userID, 1)
//
// The store keeps a leased bucket apart from its per-check bucket of the
// same key, and refills it only up to the burst less what unexpired leases
// hold: a lease moves tokens, it never mints them. A lease ends when its
// instance asks for the next one, when the key falls idle (its unspent
// tokens back in the bucket), or at its lifetime on the store's clock (the
// holder died: its unspent tokens are lost, never admitted twice).
//
// The design, with the contract's exact semantics and units, is the
// manual's docs/leases.md.
package lease
