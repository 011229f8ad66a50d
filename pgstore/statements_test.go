package pgstore

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every statement of the embedded files parses and renders without a
// placeholder left, in the order Install runs them.
func TestStatementsRender(t *testing.T) {
	var names []string
	for _, file := range []string{"schema.sql", "lease_schema.sql", "slots_schema.sql"} {
		for _, st := range statementsOf(file) {
			names = append(names, st.name)
		}
	}
	if got, want := strings.Join(names, " "), "table counts advance full period slide take take_all lease_buckets leases lease release slots slots_acquire slots_release slots_renew"; got != want {
		t.Errorf("schema statements %q, want %q", got, want)
	}
	for _, logged := range []bool{false, true} {
		s := Schema{Table: "api_buckets", Logged: logged}
		all := append(schemaSQL(s),
			render(statementText("background.sql", "heartbeat"), s),
			render(statementText("background.sql", "sweep"), s),
			render(statementText("background.sql", "sweep_leases"), s),
			render(statementText("background.sql", "sweep_slots"), s))
		for _, text := range all {
			if strings.Contains(text, "{{") || strings.HasPrefix(text, "--") || strings.HasSuffix(text, ";") {
				t.Errorf("logged %v: a statement with a placeholder, its documentation or its ';' left:\n%s", logged, text)
			}
		}
		if got := strings.Count(strings.Join(all, "\n"), "UNLOGGED "); got != 4*boolInt(!logged) {
			t.Errorf("logged %v: %d UNLOGGED tables, want %d", logged, got, 4*boolInt(!logged))
		}
	}
	if !strings.HasPrefix(isolationCheck, "\tIF current_setting('transaction_isolation')") || strings.HasSuffix(isolationCheck, "\n") {
		t.Errorf("isolationCheck = %q", isolationCheck)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The functions in the database are the embedded files' text: each body
// Install creates is the body between the $fn$ quotes of its statement.
func TestInstalledFunctionsAreTheEmbeddedText(t *testing.T) {
	db := newDB(t, Schema{Table: "embedded_buckets"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fn := regexp.MustCompile(`(?s)^CREATE OR REPLACE FUNCTION "([a-z_]+)"\(.*?\$fn\$(.*)\$fn\$$`)
	n := 0
	for _, text := range schemaSQL(Schema{Table: "embedded_buckets"}) {
		m := fn.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		n++
		var body string
		if err := db.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE proname = $1 AND pg_function_is_visible(oid)`, m[1]).Scan(&body); err != nil {
			t.Fatalf("%s: %v", m[1], err)
		}
		if body != m[2] {
			t.Errorf("%s: the installed body differs from the embedded one:\n%s\nwant:\n%s", m[1], body, m[2])
		}
	}
	if n != 11 {
		t.Errorf("%d functions in the embedded schema, want 11", n)
	}
}
