// Package remote is the shell every remote bucket store (package
// redisstore, package pgstore) is built in: the checks and defaults of the
// configuration they share (Settings), the Limiter's core that calls the
// store under a deadline and a breaker, counts, and answers by the failure
// policy when the store cannot decide (Core, Fail), the checks of a
// TakeAll's takes (CheckTakes), and a Store's background loops with the
// heartbeat that counts its instances (Background). A store adds its
// client, its keys and its scripts or statements.
//
// It builds on package failpolicy; the stores depend on it.
package remote
