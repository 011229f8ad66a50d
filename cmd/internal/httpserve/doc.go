// Package httpserve is the HTTP side of faucet serve: the public handler
// (the check API, or the limiter in front of a reverse proxy whose
// upgrades pass a gate and become bounded tunnels), the admin handler
// (health and metrics), and the servers and capped listeners they run on.
package httpserve
