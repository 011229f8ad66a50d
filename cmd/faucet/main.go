// Command faucet runs faucet's tools.
//
//	faucet serve [--rules FILE] [--upstream URL] [--listen ADDR] [--redis ADDR]
//	faucet sim --rate 10 --burst 50 --load 60/s --duration 5s [--set-limit AT=RATE]... [--svg FILE]
//	faucet version
//
// serve enforces rate-limit rules on HTTP requests, as a reverse proxy in
// front of an upstream or as a JSON check API (faucet serve --help); with
// --redis, every instance pointed at the same Redis shares the buckets.
//
// sim drives one key of an engine with a steady stream of requests on a
// virtual clock and prints, per interval, how many were admitted and denied
// and the tokens left; --set-limit changes the rate during the run, and
// --svg draws the same as a chart.
package main

import (
	"fmt"
	"io"
	"os"
	// Calendar quotas name time zones; a container image often has no
	// zone database of its own.
	_ "time/tzdata"

	"github.com/faucetgo/faucet/cmd/internal/runner"
	"github.com/faucetgo/faucet/internal/sim"
)

const usage = `usage: faucet <command> [flags]

commands:
  serve    enforce rate-limit rules on HTTP: reverse proxy or check API
           (faucet serve --help for its flags)
  sim      simulate a client against a limit on a virtual clock
           (faucet sim --help for its flags)
  version  print the version and the revision it was built from
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code: 0 on
// success, 2 for usage errors, 1 for anything else.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runner.Run(args[1:], stdout, stderr)
	case "sim":
		return sim.Main("faucet sim", args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version":
		fmt.Fprintln(stdout, buildVersion())
		return 0
	default:
		fmt.Fprintf(stderr, "faucet: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
