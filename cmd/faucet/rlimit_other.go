//go:build !unix

package main

// openFileLimit reports that the limit is unknown on this platform.
func openFileLimit() (uint64, bool) { return 0, false }
