package httplimit_test

import (
	"os"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// The rules file on the README's front page is valid, and holds the two
// rules its text describes: one keyed by API key, with a limit a second
// and a monthly quota, and one by client address.
func TestReadmeRules(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```json\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no JSON block")
	}
	rules, err := httplimit.ParseRules([]byte(block))
	if err != nil {
		t.Fatalf("the README's rules: %v", err)
	}
	if len(rules) != 2 || rules[0].LimitKeys[0] != "header:x-api-key" || rules[1].LimitKeys[0] != "ip:address" ||
		len(rules[0].Limits) != 2 || rules[0].Limits[1].Name != "free-month" || rules[0].Limits[1].Period != "month" {
		t.Fatalf("the README's rules: %+v", rules)
	}
	m, err := httplimit.New(rules, httplimit.Options{})
	if err != nil {
		t.Fatalf("httplimit.New with the README's rules: %v", err)
	}
	m.Close()
}

// Every rule, rules file and limit shown in docs/rules.md loads: a rule
// of each kind, in memory.
func TestRulesDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```json\n")[1:]
	if len(blocks) < 7 {
		t.Fatalf("docs/rules.md shows %d JSON blocks, want at least 7", len(blocks))
	}
	for _, b := range blocks {
		block, _, _ := strings.Cut(b, "```")
		doc := block
		switch {
		case strings.Contains(block, `"rules"`):
		case strings.Contains(block, `"limit_keys"`):
			doc = `{"rules":[` + block + `]}`
		default: // one limit
			doc = `{"rules":[{"name":"r","limit_keys":["global"],"limits":[` + block + `]}]}`
		}
		rules, err := httplimit.ParseRules([]byte(doc))
		if err != nil {
			t.Errorf("docs/rules.md block\n%s: %v", block, err)
			continue
		}
		m, err := httplimit.New(rules, httplimit.Options{JWT: nil})
		if err != nil && !strings.Contains(err.Error(), "JWT") && !strings.Contains(err.Error(), "jwt") {
			t.Errorf("docs/rules.md block\n%s: New: %v", block, err)
			continue
		}
		if m != nil {
			m.Close()
		}
	}
}
