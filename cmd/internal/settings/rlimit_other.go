//go:build !unix

package settings

// OpenFileLimit reports that the limit is unknown on this platform.
func OpenFileLimit() (uint64, bool) { return 0, false }
