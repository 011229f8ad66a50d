package main

import (
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
)

// Asking for help is not an error: every form exits 0 and prints the usage
// on stdout, where a script piping it to a pager or grep will find it.
func TestHelpExitsZeroOnStdout(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"--help"},
		{"serve", "-h"}, {"serve", "--help"},
		{"sim", "-h"}, {"sim", "--help"},
	} {
		code, out, errs := runArgs(args...)
		if code != 0 || !strings.HasPrefix(out, "usage: faucet") || errs != "" {
			t.Errorf("faucet %s: exit %d, stdout %.40q, stderr %.80q; want exit 0 and the usage on stdout only",
				strings.Join(args, " "), code, out, errs)
		}
	}
}

// A mistake still exits 2, with the error and the usage on stderr.
func TestBadFlagExits2OnStderr(t *testing.T) {
	for _, cmd := range []string{"serve", "sim"} {
		code, out, errs := runArgs(cmd, "--no-such-flag")
		if code != 2 || out != "" || !strings.Contains(errs, "no-such-flag") || !strings.Contains(errs, "usage: faucet "+cmd) {
			t.Errorf("faucet %s --no-such-flag: exit %d, stdout %q, stderr %.80q; want exit 2, error and usage on stderr", cmd, code, out, errs)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		code, out, errs := runArgs(arg)
		if code != 0 || !strings.HasPrefix(out, "faucet ") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 || errs != "" {
			t.Errorf("faucet %s: exit %d, stdout %q, stderr %q; want exit 0 and one line", arg, code, out, errs)
		}
	}
}

func Example_version() {
	fmt.Println(versionLine(nil))
	fmt.Println(versionLine(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}))
	fmt.Println(versionLine(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		}}))
	// Output:
	// faucet (devel)
	// faucet (devel) go1.26.0
	// faucet v1.2.0 revision 0123456789abcdef0123456789abcdef01234567 2026-01-02T03:04:05Z (modified) go1.26.0
}
