package rulesdb

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
)

// Close writes the warning the table's throttle holds back, so that a
// shutdown inside an interval loses no count of them.
func TestCloseWritesTheHeldWarning(t *testing.T) {
	var buf bytes.Buffer
	tb := &Table{repeats: logthrottle.NewHandler(slog.NewTextHandler(&buf, nil), time.Hour)}
	log := slog.New(tb.repeats)
	for range 3 {
		log.Warn("rules table: not listening for changes")
	}
	if n := strings.Count(buf.String(), "not listening"); n != 1 {
		t.Fatalf("%d lines before Close, want the first alone:\n%s", n, buf.String())
	}
	tb.Close()
	if out := buf.String(); strings.Count(out, "not listening") != 2 || !strings.Contains(out, "suppressed=1") {
		t.Errorf("after Close:\n%s\nwant the held line, with 1 suppressed", out)
	}
}
