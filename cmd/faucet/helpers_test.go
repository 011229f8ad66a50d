package main

import (
	"context"
	"errors"
	"net"

	"github.com/faucetgo/faucet/cmd/internal/settings"
)

// The end-to-end tests run the binary; these are the few names of the
// code under it that they share.

// jwtSecretEnv is the environment variable of the HS256 secret.
const jwtSecretEnv = settings.JWTSecretEnv

// isTimeout tells a deadline that passed from other errors.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// defaultAdminListen is --admin-listen by default.
const defaultAdminListen = settings.DefaultAdminListen

// openFileLimit is the process's open-file limit, if known.
func openFileLimit() (uint64, bool) { return settings.OpenFileLimit() }
