// Command faucet runs faucet's tools.
//
//	faucet serve [--rules FILE] [--upstream URL] [--listen ADDR] [--redis ADDR]
//	faucet sim --rate 10 --burst 50 --load 60/s --duration 5s [--svg FILE]
//
// serve enforces rate-limit rules on HTTP requests, as a reverse proxy in
// front of an upstream or as a JSON check API (faucet serve --help); with
// --redis, every instance pointed at the same Redis shares the buckets.
//
// sim drives one key of an engine with a steady stream of requests on a
// virtual clock and prints, per interval, how many were admitted and denied
// and the tokens left; --svg draws the same as a chart.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: faucet <command> [flags]

commands:
  serve  enforce rate-limit rules on HTTP: reverse proxy or check API
         (faucet serve --help for its flags)
  sim    simulate a client against a limit on a virtual clock
         (faucet sim --help for its flags)
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
		return runServe(args[1:], stdout, stderr)
	case "sim":
		return runSim(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "faucet: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
