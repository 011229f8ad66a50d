module github.com/faucetgo/faucet

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	golang.org/x/sys v0.49.0
)
