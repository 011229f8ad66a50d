package runner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// What was opened last is closed first, every closer runs though one
// fails, the failure is reported, and a second close runs nothing again.
func TestClosersRunInReverseOnce(t *testing.T) {
	var order []string
	var c closers
	for _, name := range []string{"store", "limiter", "listeners"} {
		c.add(func(context.Context) error {
			order = append(order, name)
			if name == "limiter" {
				return errors.New("failed")
			}
			return nil
		})
	}
	if c.close(context.Background()) {
		t.Error("close reported success with a closer failing")
	}
	if want := []string{"listeners", "limiter", "store"}; !slices.Equal(order, want) {
		t.Errorf("closed %v, want %v", order, want)
	}
	if !c.close(context.Background()) || len(order) != 3 {
		t.Errorf("a second close: ran %v, want nothing more", order[3:])
	}
}

// A close function's error is logged, naming what failed, and fails the
// shutdown; one that succeeds logs nothing.
func TestLoggedClose(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var c closers
	c.add(loggedClose(log, "rate limiter", func() error { return errors.New("store: connection reset") }))
	c.add(loggedClose(log, "JWT verifier", func() error { return nil }))
	if c.close(context.Background()) {
		t.Error("close reported success with the limiter failing to close")
	}
	out := buf.String()
	if !strings.Contains(out, `what="rate limiter"`) || !strings.Contains(out, "connection reset") || strings.Contains(out, "JWT verifier") {
		t.Errorf("log:\n%s\nwant the limiter's failure alone", out)
	}
}
