// Command sim is faucet's simulator on its own: faucet sim without the
// server, so that it builds from faucet's root module alone, in seconds.
//
//	go run ./sim --rate 10 --burst 50 --load 60/s --duration 5s --svg sim.svg
//
// It drives one key of an engine with a steady stream of requests on a
// virtual clock and prints, per interval, how many were admitted and
// denied and the tokens left; --set-limit changes the rate during the run,
// --quota and --window-limit run a calendar quota and a strict window
// instead of the token bucket or beside it, --upstream-capacity lets an
// adaptive controller set the rate from a simulated upstream's health,
// and --svg draws the same as a chart (sim --help for the flags).
package main

import (
	"os"
	_ "time/tzdata" // --time-zone reads the same zones as faucet sim's, whatever the machine has

	"github.com/faucetgo/faucet/internal/sim"
)

func main() {
	os.Exit(sim.Main("sim", os.Args[1:], os.Stdout, os.Stderr))
}
