// Package logtest holds what the command's tests use to read the logs of
// faucet serve: a buffer a handler may write while a test reads it, and the
// fields of a JSON log line the tests look at.
package logtest
