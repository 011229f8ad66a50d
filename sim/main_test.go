package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The light command is the simulator of faucet sim: the same report, and
// the chart.
func TestSimCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	svg := filepath.Join(dir, "sim.svg")
	out, err := exec.Command(bin, "--rate", "10", "--burst", "50", "--load", "60/s", "--duration", "5s", "--svg", svg).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rate 10/s, burst 50, load 60/s (cost 1), 5s in steps of 1s\n", "  total       300        99     201", "chart written to " + svg} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if fi, err := os.Stat(svg); err != nil || fi.Size() == 0 {
		t.Errorf("no chart at %s: %v", svg, err)
	}
	var exit *exec.ExitError
	if err := exec.Command(bin, "--burst", "0.5").Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("sim --burst 0.5: %v, want exit status 2", err)
	}
}
