package settings

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// The proxy bounds delay mode by its timeouts and --max-waiting; the check
// API only decides, so it refuses in-flight limits and lets callers wait.
func TestDelayOptions(t *testing.T) {
	for _, c := range []struct {
		args        []string
		maxDelay    time.Duration
		maxWaiting  int
		checkOnly   bool
		wantProblem string
	}{
		{args: []string{"--max-conns", "100"}, checkOnly: true},
		{args: []string{"--upstream", "http://u", "--max-conns", "100"}, maxDelay: 30 * time.Second, maxWaiting: 50},
		{args: []string{"--upstream", "http://u", "--max-conns", "1"}, maxDelay: 30 * time.Second, maxWaiting: 1},
		{args: []string{"--upstream", "http://u", "--max-conns", "0"}, maxDelay: 30 * time.Second, maxWaiting: 4096},
		{args: []string{"--upstream", "http://u", "--max-conns", "100", "--max-waiting", "99", "--write-timeout", "2s", "--upstream-timeout", "500ms"},
			maxDelay: 1500 * time.Millisecond, maxWaiting: 99},
		{args: []string{"--upstream", "http://u", "--max-conns", "0", "--max-waiting", "20000", "--write-timeout", "3h"}, maxDelay: time.Hour, maxWaiting: 20000},
		{args: []string{"--upstream", "http://u", "--max-conns", "100", "--max-waiting", "100"},
			wantProblem: "--max-waiting: must be from 1 to 99, below --max-conns (100): each waiting request holds a connection, and the others must find one, got 100"},
		{args: []string{"--upstream", "http://u", "--max-conns", "100", "--max-waiting", "-1"}, wantProblem: "--max-waiting: must be from 1 to 99, below --max-conns (100)"},
		{args: []string{"--upstream", "http://u", "--max-conns", "0", "--max-waiting", "2000000"}, wantProblem: "--max-waiting: must be from 1 to 1000000, got 2000000"},
		{args: []string{"--max-waiting", "10"}, wantProblem: "--max-waiting: only means something with --upstream"},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		var s Serve
		s.Register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		opts, problems := s.Options()
		got := strings.Join(problems, "\n")
		if c.wantProblem != "" {
			if !strings.Contains(got, c.wantProblem) {
				t.Errorf("%q: problems %q, want %q", c.args, got, c.wantProblem)
			}
			continue
		}
		if got != "" || opts.MaxDelay != c.maxDelay || opts.MaxWaiting != c.maxWaiting || opts.CheckOnly != c.checkOnly {
			t.Errorf("%q: MaxDelay %v, MaxWaiting %d, CheckOnly %v, problems %q; want %v, %d, %v and none",
				c.args, opts.MaxDelay, opts.MaxWaiting, opts.CheckOnly, got, c.maxDelay, c.maxWaiting, c.checkOnly)
		}
	}
}

// The message of a max_delay above the bound names the flags it comes from.
func TestMaxDelayBound(t *testing.T) {
	f := HTTP{WriteTimeout: 2 * time.Second, UpstreamTimeout: 500 * time.Millisecond}
	got := f.MaxDelayBound()
	for _, want := range []string{"1.5s is --write-timeout (2s) less --upstream-timeout (500ms)", "raise --write-timeout or lower --upstream-timeout"} {
		if !strings.Contains(got, want) {
			t.Errorf("MaxDelayBound() = %q, want %q in it", got, want)
		}
	}
}
