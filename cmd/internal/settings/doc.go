// Package settings is the configuration of faucet serve: the flags, read
// into a struct of values (Serve) that holds nothing live, the checks that
// name every problem with the flag it comes from, and the usage text.
//
// Nothing here opens a connection or starts a goroutine: the runner does,
// from these values.
package settings
