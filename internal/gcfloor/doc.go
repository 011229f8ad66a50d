// Package gcfloor keeps a floor under the heap goal of a server process, so
// that a process with little live heap does not collect garbage every few
// hundred requests. faucet serve uses it, and so does the plain proxy it is
// measured against, so that the comparison shows the limiter's cost alone.
package gcfloor
