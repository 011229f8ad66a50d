package settings

import (
	"flag"
	"fmt"

	"github.com/faucetgo/faucet/cmd/internal/pgdsn"
	"github.com/faucetgo/faucet/pgstore/pgaudit"
)

// Audit are serve's flags for the audit log of denials in PostgreSQL.
type Audit struct {
	DSN     string
	Table   string
	Queue   int
	Install bool
}

const defaultAuditQueue = 10_000

func (f *Audit) register(fs *flag.FlagSet) {
	fs.StringVar(&f.DSN, "audit-db", "", "record every denial in PostgreSQL at this `DSN` (no password in it: set PGPASSWORD), in batches, never delaying a request")
	fs.StringVar(&f.Table, "audit-table", pgaudit.DefaultTable, "`TABLE` of the audit log (a lower-case identifier)")
	fs.IntVar(&f.Queue, "audit-queue", defaultAuditQueue, "most denials waiting to be written; beyond, they are dropped and counted")
	fs.BoolVar(&f.Install, "audit-install", false, "create the audit table and its indexes if they do not exist (without it, they must)")
}

// problems lists what is wrong with the audit flags.
func (f *Audit) problems() []string {
	var problems []string
	if f.DSN == "" {
		if f.Table != pgaudit.DefaultTable || f.Queue != defaultAuditQueue || f.Install {
			problems = append(problems, "--audit-table, --audit-queue, --audit-install: only mean something with --audit-db")
		}
		return problems
	}
	if _, err := pgdsn.Config("audit-db", f.DSN); err != nil {
		problems = append(problems, err.Error())
	}
	if _, err := pgaudit.SQL(pgaudit.Schema{Table: f.Table}); err != nil {
		problems = append(problems, "--audit-table: "+err.Error())
	}
	if f.Queue < 1 {
		problems = append(problems, fmt.Sprintf("--audit-queue: must be at least 1, got %d", f.Queue))
	}
	return problems
}
