package settings

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/pgdsn"
	"github.com/faucetgo/faucet/pgstore"
)

// Postgres are serve's flags for a bucket store in PostgreSQL.
type Postgres struct {
	DSN     string
	Table   string
	Prefix  string
	Timeout time.Duration
	Share   float64
	Install bool
	Logged  bool
	Sweep   time.Duration
}

const defaultPostgresPrefix = "http:"

func (f *Postgres) register(fs *flag.FlagSet) {
	fs.StringVar(&f.DSN, "postgres", "", "keep buckets in PostgreSQL at `DSN` (URL or key=value; no password: PGPASSWORD), shared by every instance")
	fs.StringVar(&f.Table, "postgres-table", pgstore.DefaultTable, "bucket table; its functions are named after it")
	fs.StringVar(&f.Prefix, "postgres-prefix", defaultPostgresPrefix, "prefix of every bucket's key; instances share buckets only with the same prefix")
	fs.DurationVar(&f.Timeout, "postgres-timeout", pgstore.DefaultTimeout, "longest wait for PostgreSQL per request before the in-memory fallback (or the rule's fail_mode) decides")
	fs.Float64Var(&f.Share, "postgres-fallback-share", 0, "while PostgreSQL fails, decide in memory at this `SHARE` of each rule's rate and burst, in (0, 1] (0: 1/N, N the instances sharing the table, counted by their heartbeats)")
	fs.BoolVar(&f.Install, "postgres-install", false, "create the bucket table and its functions if missing (and replace the functions) at start")
	fs.BoolVar(&f.Logged, "postgres-logged", false, "with --postgres-install, create a logged table (kept across a crash, replicated) instead of an UNLOGGED one")
	fs.DurationVar(&f.Sweep, "postgres-sweep", 30*time.Second, "how often to remove the rows of buckets that are full again (0: never; another instance or a job sweeps)")
}

// problems lists what is wrong with the PostgreSQL flags.
func (f *Postgres) problems(redis string) []string {
	var problems []string
	if f.DSN == "" {
		if f.Table != pgstore.DefaultTable || f.Prefix != defaultPostgresPrefix || f.Timeout != pgstore.DefaultTimeout ||
			f.Share != 0 || f.Install || f.Logged || f.Sweep != 30*time.Second {
			problems = append(problems, "--postgres-table, --postgres-prefix, --postgres-timeout, --postgres-fallback-share, --postgres-install, --postgres-logged, --postgres-sweep: only mean something with --postgres")
		}
		return problems
	}
	if redis != "" {
		problems = append(problems, "--postgres: one bucket store at a time, not with --redis")
	}
	if _, err := pgdsn.Config("postgres", f.DSN); err != nil {
		problems = append(problems, err.Error())
	}
	if err := (pgstore.StoreOptions{Table: f.Table, Prefix: f.Prefix, Timeout: f.Timeout}).Check(); err != nil {
		problems = append(problems, "--postgres-table, --postgres-prefix, --postgres-timeout: "+strings.TrimPrefix(err.Error(), pgstore.ErrInvalidConfig.Error()+": "))
	}
	if f.Timeout <= 0 {
		problems = append(problems, fmt.Sprintf("--postgres-timeout: must be positive, got %v", f.Timeout))
	}
	if !(f.Share >= 0 && f.Share <= 1) {
		problems = append(problems, fmt.Sprintf("--postgres-fallback-share: must be in (0, 1], or 0 for 1/instances, got %v", f.Share))
	}
	if f.Logged && !f.Install {
		problems = append(problems, "--postgres-logged: only means something with --postgres-install")
	}
	if f.Sweep < 0 {
		problems = append(problems, fmt.Sprintf("--postgres-sweep: must be 0 (never) or positive, got %v", f.Sweep))
	}
	return problems
}
