// Package redistest starts Redis servers for tests: redis-server on a free
// loopback port, without persistence, in a temporary directory, stopped at
// the test's cleanup. Tests of redisstore, of faucet serve and of the
// benchmarks use it.
//
// Without redis-server a test that asks for a server is skipped with a
// message saying how to install it; with FAUCET_REQUIRE_REDIS=1 in the
// environment, as CI sets it, it fails instead.
package redistest
