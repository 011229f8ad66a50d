package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The markers between which -readme writes the summary table. Everything
// outside them is left as it is.
const (
	beginMarker = "<!-- bench:summary:begin -->"
	endMarker   = "<!-- bench:summary:end -->"
)

// writeSummary replaces what lies between the markers in the file at path
// with the README's short table (readmeTable), its links pointing to the
// document at doc.
func writeSummary(path, doc string, rows []summaryRow) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	link, err := relLink(path, doc)
	if err != nil {
		return err
	}
	text, err := replaceBetween(old, readmeTable(rows, link))
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return os.WriteFile(path, text, 0o644)
}

// replaceBetween returns text with what lies between beginMarker and
// endMarker replaced by body. Each marker must occur once, the begin marker
// first.
func replaceBetween(text []byte, body string) ([]byte, error) {
	begin, end := []byte(beginMarker), []byte(endMarker)
	for _, m := range [][]byte{begin, end} {
		if n := bytes.Count(text, m); n != 1 {
			return nil, fmt.Errorf("marker %s occurs %d times, want once", m, n)
		}
	}
	i, j := bytes.Index(text, begin)+len(begin), bytes.Index(text, end)
	if j < i {
		return nil, fmt.Errorf("marker %s comes before %s", endMarker, beginMarker)
	}
	var out bytes.Buffer
	out.Write(text[:i])
	out.WriteString("\n" + body + "\n")
	out.Write(text[j:])
	return out.Bytes(), nil
}

// relLink is the path of doc from the directory of the file at from.
func relLink(from, doc string) (string, error) {
	a, err := filepath.Abs(filepath.Dir(from))
	if err != nil {
		return "", err
	}
	b, err := filepath.Abs(doc)
	if err != nil {
		return "", err
	}
	r, err := filepath.Rel(a, b)
	return filepath.ToSlash(r), err
}

// readmePeers are the peers the README's table compares with, in its
// order: the standard library's limiter (alone for one key, in a map for
// many), the most used keyed library, the Redis library, the Envoy
// service and NGINX's limit_req at the edge. The full summary is in
// BENCHMARKS.md.
var readmePeers = []string{"x/time/rate", "x/time/rate + xsync.MapOf", "sethvargo/go-limiter", "go-redis/redis_rate", "envoyproxy/ratelimit", "NGINX limit_req"}

// readmeTable is the summary's brief rows cut to the README's peers: a row
// keeps at most one x/time/rate variant (plain where it ran), and a row
// with none of the peers is left out.
func readmeTable(rows []summaryRow, doc string) string {
	var b strings.Builder
	b.WriteString("| scenario | faucet | against | measured in |\n|---|---|---|---|\n")
	for _, r := range rows {
		if !r.brief {
			continue
		}
		var cells []string
		plain := false
		for _, p := range readmePeers {
			for _, v := range r.against {
				if v.peer != p || (p == "x/time/rate + xsync.MapOf" && plain) {
					continue
				}
				if p == "x/time/rate" {
					plain = true
				}
				cells = append(cells, v.cell())
			}
		}
		if len(cells) == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | [%s](%s#%s) |\n", r.what, r.faucet, strings.Join(cells, ", "), r.label, doc, anchor(r.section))
	}
	return b.String()
}
