package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// The markers between which -readme writes the summary table. Everything
// outside them is left as it is.
const (
	beginMarker = "<!-- bench:summary:begin -->"
	endMarker   = "<!-- bench:summary:end -->"
)

// writeSummary replaces what lies between the markers in the file at path
// with the summary table, its links pointing to the document at doc.
func writeSummary(path, doc string, rows []summaryRow) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	link, err := relLink(path, doc)
	if err != nil {
		return err
	}
	text, err := replaceBetween(old, summaryTable(rows, link))
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
