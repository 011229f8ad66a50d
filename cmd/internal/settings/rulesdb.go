package settings

import (
	"flag"
	"strings"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/pgdsn"
	"github.com/faucetgo/faucet/pgstore/pgrules"
)

// RulesDB are serve's flags for rules kept in a PostgreSQL table.
type RulesDB struct {
	DSN     string
	Table   string
	Install bool
	UserKey string
	PlanKey string
	Poll    time.Duration
}

func (f *RulesDB) register(fs *flag.FlagSet) {
	fs.StringVar(&f.DSN, "rules-db", "", "read the rules from a PostgreSQL table at this `DSN` instead of a file (no password in it: PGPASSWORD or a password file)")
	fs.StringVar(&f.Table, "rules-db-table", pgrules.DefaultTable, "the rules' `TABLE`, or schema.table")
	fs.BoolVar(&f.Install, "rules-db-install", false, "create the rules table if missing (or upgrade it: add the calendar quota columns, drop UNIQUE (key_pattern, plan)), and the trigger that notifies its changes")
	fs.StringVar(&f.UserKey, "rules-db-user-key", pgrules.DefaultUserKey, "limit `KEY` of the rows of scope user: where a request's user comes from")
	fs.StringVar(&f.PlanKey, "rules-db-plan-key", pgrules.DefaultPlanKey, "match `KEY` a row's plan is compared with")
	fs.DurationVar(&f.Poll, "rules-db-poll", time.Minute, "how often to re-read the rules table without a notification of a change")
}

// Mapping is how the table's rows become rules.
func (f *RulesDB) Mapping() pgrules.Mapping {
	return pgrules.Mapping{UserKey: f.UserKey, PlanKey: f.PlanKey}
}

// problems lists what is wrong with the rules table flags; rulesFile is
// --rules, which excludes them.
func (f *RulesDB) problems(rulesFile string) []string {
	if f.DSN == "" {
		if f.Install || f.Table != pgrules.DefaultTable || f.UserKey != pgrules.DefaultUserKey || f.PlanKey != pgrules.DefaultPlanKey || f.Poll != time.Minute {
			return []string{"--rules-db-table, --rules-db-install, --rules-db-user-key, --rules-db-plan-key, --rules-db-poll: only mean something with --rules-db"}
		}
		return nil
	}
	var out []string
	if rulesFile != "" {
		out = append(out, "--rules, --rules-db: give one; the rules come from a file or from a table")
	}
	if _, err := pgdsn.Config("rules-db", f.DSN); err != nil {
		out = append(out, err.Error())
	}
	if _, err := pgrules.ParseTable(f.Table); err != nil {
		out = append(out, "--rules-db-table: "+err.Error())
	}
	if err := f.Mapping().Check(); err != nil {
		out = append(out, "--rules-db-user-key, --rules-db-plan-key: "+err.Error())
	}
	if f.Poll <= 0 {
		out = append(out, "--rules-db-poll: must be positive")
	}
	return out
}

// TableName is the table as PostgreSQL names it, for messages.
func (f *RulesDB) TableName() string {
	id, _ := pgrules.ParseTable(f.Table)
	return strings.Join(id, ".")
}
