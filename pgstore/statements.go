package pgstore

import (
	"embed"
	"fmt"
	"regexp"
	"strings"
)

// The SQL and PL/pgSQL that pgstore sends live in the .sql files of sql/,
// embedded in the package, so that they read (and diff, and lint) as SQL.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// statement is one statement of a .sql file: the name on the
// "-- name: <name>" line that starts it, and its text up to the ';' that
// ends it, without the comment lines right after the name (its
// documentation). Anything before a file's first name documents the file.
type statement struct{ name, text string }

// statements holds the statements of every file of sql/, parsed once when
// the package loads rather than at each sweep or heartbeat.
var statements = func() map[string][]statement {
	files, err := sqlFiles.ReadDir("sql")
	if err != nil {
		panic(err)
	}
	m := make(map[string][]statement, len(files))
	for _, f := range files {
		m[f.Name()] = parseStatements(f.Name())
	}
	return m
}()

// statementsOf returns the statements of sql/file in order.
func statementsOf(file string) []statement {
	st, ok := statements[file]
	if !ok {
		panic("pgstore: no sql/" + file)
	}
	return st
}

// parseStatements parses sql/file. The files are the package's own: one
// that does not parse is a bug, and panics when the package loads.
func parseStatements(file string) []statement {
	b, err := sqlFiles.ReadFile("sql/" + file)
	if err != nil {
		panic(err)
	}
	var out []statement
	for i, chunk := range strings.Split(string(b), "\n-- name: ")[1:] {
		name, body, _ := strings.Cut(chunk, "\n")
		body = strings.TrimRight(withoutDoc(body), " \t\n")
		text, ok := strings.CutSuffix(body, ";")
		if !ok || text == "" {
			panic(fmt.Sprintf("pgstore: sql/%s: statement %d (%s) does not end with ';'", file, i+1, name))
		}
		out = append(out, statement{name: name, text: text})
	}
	return out
}

// withoutDoc is text without its leading comment lines.
func withoutDoc(text string) string {
	for strings.HasPrefix(text, "--") {
		_, text, _ = strings.Cut(text, "\n")
	}
	return text
}

// statementText returns statement name of sql/file.
func statementText(file, name string) string {
	for _, s := range statementsOf(file) {
		if s.name == name {
			return s.text
		}
	}
	panic("pgstore: sql/" + file + " has no statement " + name)
}

// isolationCheck is sql/isolation_check.sql: a part of the take and lease
// functions' bodies, not a statement.
var isolationCheck = func() string {
	b, err := sqlFiles.ReadFile("sql/isolation_check.sql")
	if err != nil {
		panic(err)
	}
	return strings.TrimSuffix(withoutDoc(string(b)), "\n")
}()

var placeholder = regexp.MustCompile(`\{\{([a-z_]+)\}\}`)

// render fills the placeholders of a statement for the objects of s (see
// sql/schema.sql): {{table}} and {{table_<suffix>}} are the quoted names
// of s.Table and s.Table+"_<suffix>", {{unlogged}} is "UNLOGGED " unless
// s.Logged, and {{isolation_check}} is isolationCheck.
func render(text string, s Schema) string {
	return placeholder.ReplaceAllStringFunc(text, func(m string) string {
		switch name := m[2 : len(m)-2]; {
		case name == "table":
			return ident(s.Table)
		case strings.HasPrefix(name, "table_"):
			return ident(s.Table + name[len("table"):])
		case name == "unlogged":
			if s.Logged {
				return ""
			}
			return "UNLOGGED "
		case name == "isolation_check":
			return isolationCheck
		}
		panic("pgstore: unknown placeholder " + m)
	})
}
