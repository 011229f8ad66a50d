// Package bench compares faucet with the other Go rate limiters: the same
// scenarios, run through one small adapter per library, in one process, so
// that the ratios between them mean something on a noisy machine.
//
// Everything runs under go test; see BENCHMARKS.md at the repository root for
// the scenarios, the commands and the results.
package bench
