// Package pgtest starts PostgreSQL servers for tests: initdb into a
// temporary directory and postgres on a free loopback port, as an
// unprivileged user when the test runs as root (PostgreSQL refuses to run as
// root). Tests of pgstore, of faucet serve and of the benchmarks use it.
//
// Without PostgreSQL's binaries a test that asks for a server is skipped
// with a message saying how to install them; with FAUCET_REQUIRE_POSTGRES=1
// in the environment, as CI sets it, it fails instead.
package pgtest
