package pgdsn

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// PasswordEnv names where a PostgreSQL password comes from. pgx also reads
// libpq's PGPASSWORD and password file (~/.pgpass, PGPASSFILE), and the other
// PG* variables for whatever a DSN leaves out.
const PasswordEnv = "PGPASSWORD"

// Config parses the DSN given to flag (--postgres, --rules-db, --audit-db),
// refusing one that carries a password: a command line is visible to every
// user of the machine (ps, /proc), so credentials come from the environment.
func Config(flag, dsn string) (*pgxpool.Config, error) {
	if hasPassword(dsn) {
		return nil, fmt.Errorf("--%s: the DSN must not hold a password (the command line is visible to every user of the machine); set %s or use a password file", flag, PasswordEnv)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's error may quote the DSN; it holds no password here.
		return nil, fmt.Errorf("--%s: %v", flag, err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	return cfg, nil
}

// keywordPassword finds a password keyword in a keyword/value DSN: at the
// start or after a space, any case, spaces allowed before '='.
var keywordPassword = regexp.MustCompile(`(?i)(^|\s)password\s*=`)

// hasPassword reports whether a PostgreSQL connection string, URL or
// keyword/value form, names a password.
func hasPassword(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			// Unparseable: pgx will refuse it; look for the keyword anyway.
			return strings.Contains(strings.ToLower(dsn), "password")
		}
		if _, ok := u.User.Password(); ok {
			return true
		}
		return u.Query().Has("password")
	}
	// Keyword/value form: libpq and pgx allow spaces around '='.
	return keywordPassword.MatchString(dsn)
}

// Open connects a pool for flag's DSN and checks that the server answers
// within timeout.
func Open(ctx context.Context, flag, dsn string, timeout time.Duration) (*pgxpool.Pool, error) {
	cfg, err := Config(flag, dsn)
	if err != nil {
		return nil, err
	}
	return OpenConfig(ctx, flag, cfg, timeout)
}

// OpenConfig is Open for a parsed configuration.
func OpenConfig(ctx context.Context, flag string, cfg *pgxpool.Config, timeout time.Duration) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--%s: %v", flag, err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("--%s: %s: %v", flag, cfg.ConnConfig.Host, err)
	}
	return pool, nil
}
