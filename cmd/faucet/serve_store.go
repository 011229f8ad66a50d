package main

import "github.com/faucetgo/faucet/httplimit"

// newStore builds the bucket store serve runs on, and the function that
// closes it on shutdown. Every store option of serve is decided here.
func newStore(cfg *serveConfig) (httplimit.Store, func() error, error) {
	s := httplimit.NewMemoryStore(httplimit.MemoryOptions{MaxKeys: cfg.maxKeys})
	return s, s.Close, nil
}
