package pgrules

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DefaultTable is the seed's table, RateLimitRule, as PostgreSQL names it
// (an unquoted name is folded to lower case).
const DefaultTable = "ratelimitrule"

// DefaultChannel is the channel the trigger notifies and Watcher listens
// on.
const DefaultChannel = "faucet_rules"

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxIdentifier is PostgreSQL's NAMEDATALEN less one: a longer name would
// be cut short, silently naming another table.
const maxIdentifier = 63

// ParseTable checks a table name, "table" or "schema.table", each part
// letters, digits and _ (not starting with a digit), at most 63 bytes. It
// folds the name to lower case, as PostgreSQL does with an unquoted name,
// so that "RateLimitRule" is the seed's table; "" is DefaultTable.
func ParseTable(name string) (pgx.Identifier, error) {
	if name == "" {
		name = DefaultTable
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("table %q: must be a name or schema.name", name)
	}
	for i, p := range parts {
		if err := checkIdentifier(p); err != nil {
			return nil, fmt.Errorf("table %q: %v", name, err)
		}
		parts[i] = strings.ToLower(p)
	}
	return pgx.Identifier(parts), nil
}

// checkIdentifier reports why s is not a plain SQL identifier.
func checkIdentifier(s string) error {
	switch {
	case !identifier.MatchString(s):
		return fmt.Errorf("%q must be letters, digits and _, not starting with a digit", s)
	case len(s) > maxIdentifier:
		return fmt.Errorf("%q must be at most %d bytes, got %d", s, maxIdentifier, len(s))
	}
	return nil
}

// channelName checks a notification channel and folds it to lower case.
func channelName(s string) (string, error) {
	if s == "" {
		return DefaultChannel, nil
	}
	if err := checkIdentifier(s); err != nil {
		return "", fmt.Errorf("channel: %v", err)
	}
	return strings.ToLower(s), nil
}
