// Package cli holds what faucet's commands share in reading their command
// line.
package cli
