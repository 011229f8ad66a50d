package httplimit

import (
	"context"
	"fmt"
	"os"
)

// RuleSource is where a rule set is kept: a rules file (FileSource), a
// database table (package github.com/faucetgo/faucet/pgstore/pgrules). A
// program reads it at start for New, and again whenever it may have
// changed for Middleware.Reload; the source only reads, the program
// decides when.
type RuleSource interface {
	// Rules reads the rule set as the source holds it now.
	//
	// A nil error means every entry was usable. A source whose entries
	// stand alone (the rows of a table) skips the bad ones instead of
	// failing: it returns the others along with an error naming every
	// entry left out and each of its problems (KeepValid finds them). No
	// rules with an error means nothing usable was read: the rules in force
	// should stay.
	Rules(ctx context.Context) ([]Rule, error)
}

// FileSource is a rules document in a file, read by ParseRules: all or
// nothing, since the rules of one file are written and reviewed together.
type FileSource string

// Rules reads and parses the file.
func (f FileSource) Rules(context.Context) ([]Rule, error) {
	data, err := os.ReadFile(string(f))
	if err != nil {
		return nil, err
	}
	rules, err := ParseRules(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", string(f), err)
	}
	return rules, nil
}
