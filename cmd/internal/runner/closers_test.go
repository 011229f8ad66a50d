package runner

import (
	"context"
	"errors"
	"slices"
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
