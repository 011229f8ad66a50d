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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

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
		return runServe(args[1:], stdout, stderr)
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

// parseFlags parses a command's flags. Asking for help is not a mistake:
// -h and --help print the usage to stdout and the command exits 0, where a
// bad flag prints the error and the usage to stderr and exits 2. The
// command goes on if ok; otherwise it returns code.
func parseFlags(fs *flag.FlagSet, usage string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below, once the stream is known
	err := fs.Parse(args)
	if err == nil {
		return 0, true
	}
	w, code := stderr, 2
	if errors.Is(err, flag.ErrHelp) {
		w, code = stdout, 0
	}
	fs.SetOutput(w)
	fmt.Fprint(w, usage)
	fs.PrintDefaults()
	return code, false
}
