package engine_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// stopChild is the environment variable that makes TestStoppedProcess's
// child run in this test binary.
const stopChild = "FAUCET_ENGINE_STOP_CHILD"

// A process stopped for longer than a word's window (SIGSTOP, a debugger,
// docker pause, a starved container) resumes with every clock read far
// ahead. An idle bucket drained just before the stop must then hold exactly
// what it refilled. With the reference tick that words used to resolve
// against, the first take after the stop moved the reference a minute ahead
// and the idle bucket read as if drained moments ago: tokens the client had
// earned were withheld. The test stops a child process of its own for 65 s
// (more than 7/8 of the 68.7 s span of burst 1e6's packed timestamp).
func TestStoppedProcess(t *testing.T) {
	if os.Getenv(stopChild) == "1" {
		return // the child's work is in TestStoppedProcessChild
	}
	if testing.Short() {
		t.Skip("stops a process for 65 s; runs without -short")
	}
	t.Parallel()
	const stop = 65 * time.Second
	cmd := exec.Command(os.Args[0], "-test.run=^TestStoppedProcessChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), stopChild+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("child: %q, %v", lines.Text(), lines.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stop)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "go")
	if !lines.Scan() {
		t.Fatalf("child said nothing after the stop: %v", lines.Err())
	}
	var tokens, exact, slack float64
	if _, err := fmt.Sscanf(lines.Text(), "tokens %g exact %g slack %g", &tokens, &exact, &slack); err != nil {
		t.Fatalf("child: %q: %v", lines.Text(), err)
	}
	if exact < 10*stop.Seconds() {
		t.Fatalf("the child measured %v tokens' worth of time, less than the stop's", exact)
	}
	if tokens > exact || exact-tokens >= slack {
		t.Errorf("after a %v stop the idle bucket holds %v tokens, exact %v", stop, tokens, exact)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
}

// TestStoppedProcessChild is TestStoppedProcess's child: it drains "idle",
// says ready, and once resumed takes from "busy" (moving time on, as any
// request would) and reports what "idle" holds against the exact refill.
func TestStoppedProcessChild(t *testing.T) {
	if os.Getenv(stopChild) != "1" {
		t.Skip("the child of TestStoppedProcess")
	}
	e, err := engine.New(engine.Config{Limit: 10, Burst: 1e6, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	drained := time.Now()
	e.AllowAt(drained, "idle", 1e6)
	e.AllowAt(drained, "busy", 1)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	e.AllowAt(now, "busy", 1)
	tokens := e.TokensAt(now, "idle")
	exact := min(1e6, 10*now.Sub(drained).Seconds())
	tickRefill := 10 * e.Precision().Tick.Seconds()
	fmt.Println(strings.TrimSpace(fmt.Sprintf("tokens %v exact %v slack %v", tokens, exact, 0.002+max(0.001, tickRefill)+3*tickRefill)))
}
