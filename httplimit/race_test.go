//go:build race

package httplimit_test

const raceEnabled = true
