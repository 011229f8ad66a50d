module github.com/faucetgo/faucet/fuzz

go 1.26.0

require github.com/faucetgo/faucet v0.1.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
