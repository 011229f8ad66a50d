//go:build unix

package settings

import (
	"math"
	"syscall"
)

// OpenFileLimit returns how many file descriptors this process may have
// open (RLIMIT_NOFILE). The Go runtime raises the soft limit to the hard one
// at start, so this is what serve can really use.
func OpenFileLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	n := uint64(l.Cur)
	return n, n < math.MaxInt32 // anything larger is "unlimited"
}
