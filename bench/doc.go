// Package bench compares faucet with the other Go rate limiters: the same
// scenarios, run through one small adapter per library, in one process, so
// that the ratios between them mean something on a noisy machine.
//
// Everything runs under go test; docs/performance.md at the repository root
// says what each benchmark measures, and BENCHMARKS.md holds the results
// and the commands that produced them. BenchmarkRedis also needs
// redis-server: it starts one on a free loopback port, or uses the server
// at FAUCET_REDIS_ADDR (redis.sh does that, to measure redis-benchmark's
// ceiling on the same server), and skips without one unless
// FAUCET_REQUIRE_REDIS=1. BenchmarkPostgres (postgres.sh) also starts a
// PostgreSQL server through pgstore/pgtest, and skips without PostgreSQL's
// binaries unless FAUCET_REQUIRE_POSTGRES=1.
package bench
