package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// ParseFlags parses a command's flags. Asking for help is not a mistake:
// -h and --help print the usage to stdout and the command exits 0, where a
// bad flag prints the error and the usage to stderr and exits 2. The
// command goes on if ok; otherwise it returns code.
func ParseFlags(fs *flag.FlagSet, usage string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
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
