// Package runner runs faucet serve: it reads the settings, opens what they
// name (the store, the rules and their reloading, the audit log, the
// rate-limit service, the listeners), serves until a signal, and closes
// everything it opened, in reverse order, through one list of closers.
//
// It is the only package that knows them all; each part (stores,
// httpserve, rls, rulesdb, audit, metrics) knows only the settings and
// the libraries below it.
package runner
