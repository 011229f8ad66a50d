package settings

import "testing"

// The default connection cap leaves descriptors beyond the client
// connections and their upstream ones.
func TestDefaultMaxConnsLeavesAReserve(t *testing.T) {
	n, ok := OpenFileLimit()
	if !ok {
		t.Skip("no open-file limit")
	}
	got := uint64(defaultMaxConns())
	if got != maxConnsCeiling && 2*got+min(fdReserve, n/4) > n {
		t.Errorf("defaultMaxConns %d with %d descriptors: twice it and the reserve exceed the limit", got, n)
	}
}
