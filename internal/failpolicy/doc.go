// Package failpolicy is the part of a remote bucket store (package
// redisstore, package pgstore) that decides when the store cannot: the
// failure policies (allow, deny, or decide with a local engine holding a
// share of the limit), the breaker that stops calling a failing store for a
// while, and the classification of the error (nothing was taken, or the
// outcome is unknown), so that every store behaves alike when it fails.
//
// It depends only on package engine; the stores depend on it.
package failpolicy
