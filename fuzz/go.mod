module github.com/faucetgo/faucet/fuzz

go 1.26.0

require github.com/faucetgo/faucet v0.0.0

replace github.com/faucetgo/faucet => ../
