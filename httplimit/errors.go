package httplimit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// FieldError is one problem with one field of a rule set.
type FieldError struct {
	// Rule is the rule's name, or "" when it has none (or the problem is
	// outside any rule).
	Rule string
	// Index is the rule's position in the list, from 0; -1 outside any rule.
	Index int
	// Field is the field's path inside the rule, in the JSON vocabulary
	// ("algorithm_config.burst"), or the document path outside any rule.
	Field string
	// Problem says what is wrong and what is allowed.
	Problem string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	switch {
	case e.Index >= 0 && e.Rule != "":
		fmt.Fprintf(&b, "rule %q (rules[%d])", e.Rule, e.Index)
	case e.Index >= 0:
		fmt.Fprintf(&b, "rules[%d]", e.Index)
	}
	if e.Field != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Field)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// ConfigError lists every problem found in a rule set. ParseRules, New and
// Reload return it; its message has one problem per line, those outside any
// rule first, then each rule's in rule order.
type ConfigError struct {
	Problems []*FieldError
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return "httplimit: invalid rules:\n  " + strings.Join(lines, "\n  ")
}

// problems collects FieldErrors.
type problems struct{ list []*FieldError }

func (p *problems) add(rule string, index int, field, format string, args ...any) {
	p.list = append(p.list, &FieldError{Rule: rule, Index: index, Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	// Checks run in passes (syntax, fields, tiers), each over every rule;
	// a reader fixing a file goes rule by rule.
	slices.SortStableFunc(p.list, func(a, b *FieldError) int { return cmp.Compare(a.Index, b.Index) })
	return &ConfigError{Problems: p.list}
}
