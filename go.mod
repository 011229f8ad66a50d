module github.com/faucetgo/faucet

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	golang.org/x/sys v0.49.0
)
