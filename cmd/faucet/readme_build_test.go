package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The build command of README.md makes a binary whose version names the
// revision it was built from, whatever GOFLAGS says about stamping.
func TestREADMEBuildStampsTheRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout, nothing to stamp: %v", err)
	}
	// The go command stamps only a checkout whose .git is a directory, not
	// a linked worktree's .git file.
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		t.Skip("a linked worktree: the go command stamps no revision here")
	}
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var build string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if line := sc.Text(); strings.HasPrefix(line, "go build ") && strings.HasSuffix(line, " ./cmd/faucet") {
			build = line
			break
		}
	}
	if build == "" {
		t.Fatal("README.md has no line `go build ... ./cmd/faucet`")
	}
	args := strings.Fields(build)
	bin := filepath.Join(t.TempDir(), "faucet")
	for i := range args {
		if args[i] == "-o" && i+1 < len(args) {
			args[i+1] = bin
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "revision " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
		t.Errorf("%s, then faucet version: %q, want it to name %q", build, out, want)
	}
}
