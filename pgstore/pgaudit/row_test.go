package pgaudit

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/pgstore/pgrules"
)

func TestUserID(t *testing.T) {
	for s, want := range map[string]any{"42": int64(42), "-7": int64(-7), "9223372036854775807": int64(9223372036854775807),
		"042": nil, "+42": nil, "9223372036854775808": nil, "ann": nil, "": nil, "4 2": nil} {
		id, ok := userID(s)
		var got any
		if ok {
			got = id
		}
		if got != want {
			t.Errorf("userID(%q) = %v, want %v", s, got, want)
		}
	}
}

// fit cuts at character boundaries, keeps values apart by their hash, and
// makes any bytes storable.
func TestFit(t *testing.T) {
	long := strings.Repeat("é", 300) // 600 bytes, 300 characters
	a, b := fit(long+"a", 256), fit(long+"b", 256)
	if n := utf8.RuneCountInString(a); n != 256 || !utf8.ValidString(a) {
		t.Errorf("fit of 301 characters: %d characters, valid %v", n, utf8.ValidString(a))
	}
	if a == b || a[:len(a)-16] != b[:len(b)-16] || !strings.Contains(a, "…") {
		t.Errorf("two long keys with one prefix: %q and %q", a, b)
	}
	if s := strings.Repeat("x", 256); fit(s, 256) != s {
		t.Error("a value of exactly 256 characters was changed")
	}
	if got := fit("a\x00b\xffc", 10); got != "a\uFFFDb\uFFFDc" {
		t.Errorf("fit of NUL and invalid UTF-8: %q", got)
	}
}

// A denial by a limit of a rules table's group records the limit's row
// and name: rows sharing a key are one rule, each row a limit.
func TestGroupDenialRecordsLimitRow(t *testing.T) {
	rows := []pgrules.Row{
		{RuleID: 11, KeyPattern: "ip:{ip}", Scope: "ip", RatePerSecond: 1, BurstCapacity: 5},
		{RuleID: 12, KeyPattern: "ip:{ip}", Scope: "ip", QuotaPeriod: &[]string{"day"}[0], BurstCapacity: 1},
		{RuleID: 13, KeyPattern: "global", Scope: "global", RatePerSecond: 1, BurstCapacity: 1},
	}
	rules, err := pgrules.Mapping{}.Rules(rows, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	var denials []httplimit.Denial
	lim, err := httplimit.New(rules, httplimit.Options{Now: func() time.Time { return at }, OnDeny: func(d httplimit.Denial) { denials = append(denials, d) }})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	for _, ip := range []string{"192.0.2.1", "192.0.2.1", "192.0.2.2"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = ip + ":1"
		lim.Check(r)
	}
	// The second request: the day's quota of 1 (rule 12); the third, from
	// another client: the global rule (rule 13).
	if len(denials) != 2 {
		t.Fatalf("denials %+v, want 2", denials)
	}
	vals := make([]any, len(columns))
	for i, want := range []struct {
		id   int64
		name string
	}{{12, "rule-12"}, {13, "rule-13"}} {
		row(&denials[i], pgrules.RuleIDOf, vals)
		if vals[6] != want.id || vals[7] != want.name {
			t.Errorf("denial %+v: rule_id %v, rule_name %v, want %d, %s", denials[i], vals[6], vals[7], want.id, want.name)
		}
	}
	// An Options.RuleID that knows only rule names still finds the rule.
	row(&denials[0], func(name string) (int64, bool) { return 99, name == "group-11" }, vals)
	if vals[6] != int64(99) {
		t.Errorf("rule_id by the rule's name: %v, want 99", vals[6])
	}
}
