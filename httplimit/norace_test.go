//go:build !race

package httplimit_test

const raceEnabled = false
