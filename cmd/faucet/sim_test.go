package main

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// faucet sim runs the simulator (package internal/sim, which tests it):
// the worked example of the README, and its errors name faucet sim.
func TestSimCommand(t *testing.T) {
	code, out, errs := runArgs("sim", "--rate", "10", "--burst", "50", "--load", "60/s", "--duration", "5s")
	if code != 0 || !strings.HasPrefix(out, "rate 10/s, burst 50, load 60/s (cost 1), 5s in steps of 1s\n") ||
		!regexp.MustCompile(`total\s+300\s+99\s+201`).MatchString(out) {
		t.Errorf("faucet sim: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	if code, _, errs := runArgs("sim", "--rate", "fast"); code != 2 || !strings.HasPrefix(errs, "faucet sim: --rate: ") {
		t.Errorf("faucet sim --rate fast: exit %d, stderr %q; want exit 2 and an error naming faucet sim", code, errs)
	}
}

// faucet sim reads the zones of the database built into the command. A
// period begins at midnight in Tokyo, 15:00 UTC: the quota admits 100
// from 0 h to 10 h and 100 from 15 h, 190 within 24 h; the window never
// more than 100.
func TestSimShapesCommand(t *testing.T) {
	code, out, errs := runArgs("sim", "--quota", "100", "--time-zone", "Asia/Tokyo", "--window-limit", "100", "--window", "24h",
		"--load", "10/h", "--duration", "39h", "--interval", "3h")
	for _, want := range []string{
		"calendar quota: 100 a day 00:00 (Asia/Tokyo): admitted 200, denied 190, most in any 24h: 190\n",
		"strict window: 100 in any 24h (16 slots): admitted 200, denied 190, most in any 24h: 100\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("faucet sim: exit %d, stderr %q; want %q in:\n%s", code, errs, want, out)
		}
	}
}

func TestCommandErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bogus"}, "unknown command"},
		{nil, "usage"},
	} {
		if code, _, errs := runArgs(tt.args...); code != 2 || !strings.Contains(errs, tt.msg) {
			t.Errorf("faucet %v: exit %d, stderr %q; want exit 2 mentioning %q", tt.args, code, errs, tt.msg)
		}
	}
	if code, out, _ := runArgs("help"); code != 0 || !strings.Contains(out, "sim") {
		t.Errorf("faucet help: exit %d, %q", code, out)
	}
}

// The command draws its chart without a plotting library: faucet serve
// links none, and faucet sim builds from faucet's root module alone.
func TestNoPlottingLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "gonum.org/") {
			t.Errorf("faucet links %s", pkg)
		}
	}
}
