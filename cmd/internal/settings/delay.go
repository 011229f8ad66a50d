package settings

import (
	"flag"
	"fmt"
	"time"

	"github.com/faucetgo/faucet/httplimit"
)

const (
	// maxWaitingUncapped is --max-waiting by default without a connection
	// cap: httplimit's own default.
	maxWaitingUncapped = 4096
	// maxWaitingCeiling is the most httplimit lets wait.
	maxWaitingCeiling = 1_000_000
	// maxDelayCeiling is the longest httplimit lets a rule wait.
	maxDelayCeiling = time.Hour
)

// registerDelay defines the flag of delay mode.
func (f *HTTP) registerDelay(fs *flag.FlagSet) {
	fs.IntVar(&f.MaxWaiting, "max-waiting", 0, "most requests waiting their turn at once under rules in delay mode, across rules and keys; one more gets 429\n"+
		"(delay_full). Each holds its connection while it waits: below --max-conns, so that connections stay for requests\n"+
		"that do not wait (0: half of --max-conns, at least 1; 4096 when --max-conns is 0). With --upstream only")
}

// maxWaiting is --max-waiting with its default applied.
func (f *HTTP) maxWaiting() int {
	switch {
	case f.MaxWaiting != 0:
		return f.MaxWaiting
	case f.MaxConns == 0:
		return maxWaitingUncapped
	}
	return max(1, f.MaxConns/2)
}

// MaxDelay is the longest a rule in delay mode may hold a proxied request:
// --write-timeout less --upstream-timeout, so that a request that waited
// still has the time the upstream may take to answer it. Within
// httplimit's bounds: 1ms to 1h.
func (f *HTTP) MaxDelay() time.Duration {
	return min(max(f.WriteTimeout-f.UpstreamTimeout, time.Millisecond), maxDelayCeiling)
}

// MaxDelayBound says where MaxDelay comes from, for a rule whose
// max_delay exceeds it.
func (f *HTTP) MaxDelayBound() string {
	if f.WriteTimeout-f.UpstreamTimeout > maxDelayCeiling {
		return fmt.Sprintf("%v is the most a rule may wait", maxDelayCeiling)
	}
	return fmt.Sprintf("%v is --write-timeout (%v) less --upstream-timeout (%v): a request that waited must still have the time to be answered by the upstream; raise --write-timeout or lower --upstream-timeout to let it wait longer",
		f.MaxDelay(), f.WriteTimeout, f.UpstreamTimeout)
}

// delayProblems lists what is wrong with --max-waiting; proxy tells
// whether --upstream is set.
func (f *HTTP) delayProblems(proxy bool) []string {
	switch {
	case f.MaxWaiting == 0:
		return nil
	case !proxy:
		return []string{"--max-waiting: only means something with --upstream: the check API's callers wait on their side (delay_ms)"}
	case f.MaxConns > 0 && (f.MaxWaiting < 1 || f.MaxWaiting >= f.MaxConns):
		return []string{fmt.Sprintf("--max-waiting: must be from 1 to %d, below --max-conns (%d): each waiting request holds a connection, and the others must find one, got %d",
			f.MaxConns-1, f.MaxConns, f.MaxWaiting)}
	case f.MaxWaiting < 1 || f.MaxWaiting > maxWaitingCeiling:
		return []string{fmt.Sprintf("--max-waiting: must be from 1 to %d, got %d", maxWaitingCeiling, f.MaxWaiting)}
	}
	return nil
}

// delayOptions sets the bounds of delay mode and in-flight limits in opts:
// the proxy waits (MaxDelay, MaxWaiting); the check API only decides, so
// it refuses in-flight limits, and its callers wait.
func (f *HTTP) delayOptions(opts *httplimit.Options, proxy bool) {
	if !proxy {
		opts.CheckOnly = true
		return
	}
	opts.MaxDelay = f.MaxDelay()
	opts.MaxWaiting = min(f.maxWaiting(), maxWaitingCeiling)
}
